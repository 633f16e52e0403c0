package controller

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
)

// TestOperatorRoleMayBlockOwnerDeletion: the operator, with only the rights of the role it
// is installed with (config/rbac/role.yaml, which the chart copies), creates the objects it
// owns from each kind that owns any (the backup's store pod, owned by the
// RedisClusterBackup; the restore's, owned by the RedisCluster, as are the objects apply.go
// and authapply.go write) with blockOwnerDeletion, under the OwnerReferencesPermissionEnforcement
// admission plugin OpenShift enables (suite_test.go): each kind needs update on its
// finalizers subresource.
func TestOperatorRoleMayBlockOwnerDeletion(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t)
	ctx := context.Background()
	ns := newNamespace(t)
	data, err := os.ReadFile("../config/rbac/role.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(data, role)).To(Succeed())
	role.Name = "owner-rbac-" + ns
	g.Expect(apiClient.Create(ctx, role)).To(Succeed())
	user := "operator-" + ns
	g.Expect(apiClient.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})).To(Succeed())
	t.Cleanup(func() {
		_ = apiClient.Delete(ctx, role)
		_ = apiClient.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}})
	})
	authn, err := testEnv.AddUser(envtest.User{Name: user}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	operator, err := client.New(authn.Config(), client.Options{Scheme: testScheme})
	g.Expect(err).NotTo(HaveOccurred())
	r := h.r
	r.Client, r.APIReader, r.Options.StoreImage = operator, operator, "store:test"

	g.Expect(apiClient.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})).To(Succeed())
	pvc := &redisv1alpha1.PVCDestination{ClaimName: "backups"}
	b := &redisv1alpha1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: redisv1alpha1.RedisClusterBackupSpec{ClusterName: "demo", PVC: pvc}}
	g.Expect(apiClient.Create(ctx, b)).To(Succeed())
	rc := newCluster(ns, 6)
	g.Expect(apiClient.Create(ctx, rc)).To(Succeed())
	for _, owner := range []client.Object{b, rc} {
		_, reason, msg, err := r.storePod(ctx, owner, owner.GetName()+"-store", destination{pvc: pvc, field: "spec.pvc"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(reason).To(Equal(ReasonStoreStarting), "%T %s: %s", owner, owner.GetName(), msg)
		pod := &corev1.Pod{}
		g.Expect(apiClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: owner.GetName() + "-store"}, pod)).To(Succeed())
		g.Expect(*pod.OwnerReferences[0].BlockOwnerDeletion).To(BeTrue())
	}
}
