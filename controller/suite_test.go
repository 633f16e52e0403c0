package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	goredis "github.com/go-redis/redis/v8"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

// These tests drive the reconciler against a real kube-apiserver (envtest) and real
// redis-server processes. envtest runs no kube-controller-manager, so the tests play
// the StatefulSet controller and the kubelet themselves: they create the pods and set
// their status to point at the redis-servers. The end-to-end suite (test/e2e) runs the
// same code with the real controllers and the local nodes.

var (
	testEnv    *envtest.Environment
	testScheme = runtime.NewScheme()
	apiClient  client.Client
	renderer   *render.Renderer
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(redisv1alpha1.AddToScheme(testScheme))
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "bin")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver not found in %s (run make devcluster-bins): envtest tests are skipped\n", assets)
		return m.Run()
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	// As OpenShift does: an owner reference with blockOwnerDeletion needs update on the
	// owner's finalizers subresource (TestOperatorRoleMayBlockOwnerDeletion).
	testEnv.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "failed to start envtest: %v\n", err)
		return 1
	}
	defer func() { _ = testEnv.Stop() }()
	if apiClient, err = client.NewWithWatch(cfg, client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintf(os.Stderr, "failed to create client: %v\n", err)
		return 1
	}
	if renderer, err = render.New(); err != nil {
		fmt.Fprintf(os.Stderr, "failed to compile templates: %v\n", err)
		return 1
	}
	return m.Run()
}

// harness is one reconciler wired to the test API server, counting every API write it
// makes and every Redis command it sends.
type harness struct {
	t        *testing.T
	r        *Reconciler
	recorder *record.FakeRecorder
	redis    *redistest.CommandCounter
	mu       sync.Mutex
	apiWrite []string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	if apiClient == nil {
		t.Skip("envtest binaries are absent")
	}
	h := &harness{t: t, recorder: record.NewFakeRecorder(1000), redis: redistest.NewCommandCounter()}
	count := func(verb string) func(obj client.Object) {
		return func(obj client.Object) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.apiWrite = append(h.apiWrite, fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
		}
	}
	counted := interceptor.NewClient(apiClient.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count("create")(obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count("update")(obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count("patch")(obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count("delete")(obj)
			return c.Delete(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			h.mu.Lock()
			h.apiWrite = append(h.apiWrite, fmt.Sprintf("apply %T", obj))
			h.mu.Unlock()
			return c.Apply(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			count("patch/" + sub)(obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count("update/" + sub)(obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	h.r = &Reconciler{
		Client:    counted,
		APIReader: apiClient,
		Recorder:  h.recorder,
		Renderer:  renderer,
		Options:   Options{CreateTimeout: 10 * time.Minute, ScaleTimeout: time.Minute, UpgradeTimeout: time.Minute},
		redis:     newRedisClients(RedisClientOptions{Hooks: []goredis.Hook{h.redis}}),
		now:       time.Now,
	}
	t.Cleanup(h.r.redis.closeAll)
	return h
}

// reconcile runs one reconcile of the cluster and fails the test on error.
func (h *harness) reconcile(rc *redisv1alpha1.RedisCluster) ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)})
	if err != nil {
		h.t.Fatalf("reconcile failed: %v", err)
	}
	return res
}

// writes returns the API writes made since the last call and forgets them.
func (h *harness) writes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.apiWrite
	h.apiWrite = nil
	return w
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// newNamespace creates a namespace of its own for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rec-"}}
	if err := apiClient.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}
