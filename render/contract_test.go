package render

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// TestPodContract checks the points of docs/architecture.md's pod contract that the
// kubelet and the controller rely on, on typed objects decoded from the render.
func TestPodContract(t *testing.T) {
	r := newRenderer(t)
	for _, c := range renderCases(t) {
		t.Run(c.name, func(t *testing.T) {
			clusters, err := ReadFile(c.file)
			if err != nil {
				t.Fatal(err)
			}
			rc := clusters[0]
			objs, err := r.Render(rc, c.conf)
			if err != nil {
				t.Fatal(err)
			}
			name, ns := rc.Name, rc.Namespace
			if ns == "" {
				ns = "default"
			}
			var cm corev1.ConfigMap
			var headless, client corev1.Service
			var sts appsv1.StatefulSet
			for i, into := range []any{&cm, &headless, &client, &sts} {
				fromUnstructured(t, objs[i], into)
			}
			selector := map[string]string{"app.kubernetes.io/name": "redis-cluster", "app.kubernetes.io/instance": name}

			if cm.Name != name+"-config" || headless.Name != name || client.Name != name+"-client" || sts.Name != name {
				t.Errorf("names: %s %s %s %s", cm.Name, headless.Name, client.Name, sts.Name)
			}
			for _, m := range []map[string]string{cm.Labels, headless.Labels, client.Labels, sts.Labels} {
				if m["app.kubernetes.io/managed-by"] != "redis-cluster-operator" || m["app.kubernetes.io/instance"] != name || m["app.kubernetes.io/name"] != "redis-cluster" {
					t.Errorf("object labels %v lack the contract's", m)
				}
			}
			if !mapsEqual(sts.Spec.Selector.MatchLabels, selector) || !mapsEqual(headless.Spec.Selector, selector) || !mapsEqual(client.Spec.Selector, selector) {
				t.Errorf("selectors differ from %v", selector)
			}
			for k, v := range selector {
				if sts.Spec.Template.Labels[k] != v {
					t.Errorf("pod template label %s=%q, want %q", k, sts.Spec.Template.Labels[k], v)
				}
			}
			if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses || sts.Spec.ServiceName != name {
				t.Errorf("headless Service: clusterIP %q publishNotReady %v serviceName %q", headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses, sts.Spec.ServiceName)
			}
			if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || sts.Namespace != ns {
				t.Errorf("podManagementPolicy %q namespace %q", sts.Spec.PodManagementPolicy, sts.Namespace)
			}

			conf := cm.Data["redis.conf"]
			// The agent and the controller reach Redis on 6379: the plain port, or with
			// spec.tls the TLS port (the plain one then 6380, or off).
			servePort := "port 6379"
			if rc.Spec.TLS != nil {
				servePort = "tls-port 6379"
			}
			for _, line := range []string{"cluster-enabled yes", "cluster-config-file /data/nodes.conf", "dir /data", servePort} {
				if !slices.Contains(strings.Split(conf, "\n"), line) {
					t.Errorf("redis.conf lacks %q", line)
				}
			}
			sum := sha256.Sum256([]byte(restartConf(conf)))
			if got := sts.Spec.Template.Annotations["redis.middleware.hc.cn/config-hash"]; got != hex.EncodeToString(sum[:]) {
				t.Errorf("config-hash %q is not the sha256 of redis.conf without its live directives", got)
			}

			redis := sts.Spec.Template.Spec.Containers[0]
			if redis.Name != "redis" || redis.Image != rc.Spec.Image() || !slices.Equal(redis.Command, []string{"redis-server"}) {
				t.Errorf("redis container %q image %q (want %q) command %v", redis.Name, redis.Image, rc.Spec.Image(), redis.Command)
			}
			wantArgs := []string{"/etc/redis/redis.conf", "--cluster-announce-ip", "$(POD_IP)", "--bind", "$(POD_IP)"}
			if !slices.Equal(redis.Args[:len(wantArgs)], wantArgs) {
				t.Errorf("args %v do not start with %v", redis.Args, wantArgs)
			}
			env := map[string]corev1.EnvVar{}
			for _, e := range redis.Env {
				env[e.Name] = e
			}
			for n, path := range map[string]string{"POD_IP": "status.podIP", "POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
				if e := env[n]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
					t.Errorf("env %s is not from %s: %+v", n, path, e)
				}
			}
			hasMaxmemory := false
			for _, e := range rc.Spec.PodTemplate().Env {
				hasMaxmemory = hasMaxmemory || e.Name == "MAXMEMORY"
			}
			if got := hasArgPair(redis.Args, "--maxmemory", "$(MAXMEMORY)"); got != hasMaxmemory {
				t.Errorf("--maxmemory $(MAXMEMORY) in args: %v, want %v", got, hasMaxmemory)
			}
			if _, ok := env["REDIS_PASSWORD"]; ok {
				t.Errorf("the redis container has the password in its env")
			}
			for _, a := range redis.Args {
				if strings.Contains(a, "requirepass") || strings.Contains(a, "masterauth") || strings.Contains(a, "PASSWORD") {
					t.Errorf("args %v carry a password setting", redis.Args)
				}
			}
			for _, l := range strings.Split(conf, "\n") {
				if f := strings.Fields(l); len(f) > 0 && slices.Contains([]string{"requirepass", "masterauth", "user", "masteruser"}, f[0]) {
					t.Errorf("redis.conf sets %q; passwords and users belong in the auth file", l)
				}
			}
			hasInclude := slices.Contains(strings.Split(conf, "\n"), "include /etc/redis-auth/auth.conf")
			var authVol *corev1.Volume
			for i, v := range sts.Spec.Template.Spec.Volumes {
				if v.Name == "auth" {
					authVol = &sts.Spec.Template.Spec.Volumes[i]
				}
			}
			// A password unless disablePassword: spec.passwordSecret's or the generated one.
			if !rc.Spec.DisablePassword {
				if !hasInclude {
					t.Errorf("redis.conf does not include the auth file")
				}
				if authVol == nil || authVol.Secret == nil || authVol.Secret.SecretName != name+"-auth" {
					t.Errorf("auth volume %+v is not Secret %s-auth", authVol, name)
				}
				if m := redis.VolumeMounts; !slices.ContainsFunc(m, func(m corev1.VolumeMount) bool {
					return m.Name == "auth" && m.MountPath == "/etc/redis-auth" && m.ReadOnly
				}) {
					t.Errorf("auth not mounted read-only at /etc/redis-auth: %+v", m)
				}
			} else if hasInclude || authVol != nil {
				t.Errorf("auth file with disablePassword")
			}
			wantPorts := 2
			if rc.Spec.TLS != nil && !rc.Spec.TLS.DisablePlainPort {
				wantPorts = 3 // and the plain port, 6380
			}
			if len(redis.Ports) != wantPorts || redis.Ports[0].ContainerPort != 6379 || redis.Ports[0].Name != "redis" || redis.Ports[1].ContainerPort != 16379 || redis.Ports[1].Name != "cluster-bus" {
				t.Errorf("ports %+v", redis.Ports)
			}
			for _, p := range []*corev1.Probe{redis.ReadinessProbe, redis.LivenessProbe} {
				if p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntValue() != 6379 {
					t.Errorf("probe %+v is not tcpSocket 6379", p)
				}
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range redis.VolumeMounts {
				mounts[m.Name] = m
			}
			if mounts["config"].MountPath != "/etc/redis" || mounts["data"].MountPath != "/data" {
				t.Errorf("mounts %+v", redis.VolumeMounts)
			}
			pod := rc.Spec.PodTemplate()
			volumeType := pod.Volumes.Type
			if volumeType == "" {
				volumeType = redisv1alpha1.VolumeTypeEmptyDir // the CRD's default
			}
			checkDataVolume(t, string(volumeType), &sts, mounts["data"])

			if got := containerNames(sts.Spec.Template.Spec.InitContainers); (pod.InitImage != "") != slices.Equal(got, []string{"init"}) {
				t.Errorf("init containers %v for initImage %q", got, pod.InitImage)
			}
			if got := containerNames(sts.Spec.Template.Spec.Containers); (pod.MonitorImage != "") != slices.Equal(got, []string{"redis", "exporter"}) {
				t.Errorf("containers %v for monitorImage %q", got, pod.MonitorImage)
			}
		})
	}
}

func checkDataVolume(t *testing.T, typ string, sts *appsv1.StatefulSet, mount corev1.VolumeMount) {
	t.Helper()
	var data *corev1.Volume
	for i, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == "data" {
			data = &sts.Spec.Template.Spec.Volumes[i]
		}
	}
	switch typ {
	case "emptyDir":
		if data == nil || data.EmptyDir == nil || mount.SubPathExpr != "" {
			t.Errorf("emptyDir: volume %+v mount %+v", data, mount)
		}
	case "hostPath":
		if data == nil || data.HostPath == nil || mount.SubPathExpr != "$(POD_NAMESPACE)/$(POD_NAME)" {
			t.Errorf("hostPath: volume %+v mount %+v", data, mount)
		}
	case "nfs":
		if data == nil || data.PersistentVolumeClaim == nil || mount.SubPathExpr != "$(POD_NAME)" {
			t.Errorf("nfs: volume %+v mount %+v", data, mount)
		}
	case "volumeClaimTemplate":
		if data != nil || len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" {
			t.Errorf("volumeClaimTemplate: volume %+v claims %+v", data, sts.Spec.VolumeClaimTemplates)
		}
	default:
		t.Errorf("unknown volume type %q", typ)
	}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("failed to decode %s %s strictly: %v", u.GetKind(), u.GetName(), err)
	}
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	return unstructured.NestedInt64(obj, fields...)
}

func hasArgPair(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// restartConf is redis.conf without the lines of live directives: what the pod template's
// config hash covers (templates/configmap.cue computes the same in CUE).
func restartConf(conf string) string {
	var keep []string
	for _, line := range strings.Split(conf, "\n") {
		if f := strings.Fields(line); len(f) > 0 && topology.IsLiveDirective(f[0]) {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
