// Command manager runs the RedisCluster operator. `manager render -f FILE` prints the
// objects the operator would apply for a RedisCluster manifest, without a cluster.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/controller"
	"github.com/hc-middleware/redis-cluster-operator/metricsauth"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/render"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "backup-store" {
		// The process of a store pod, which serves a PersistentVolumeClaim backup destination.
		if err := backup.RunStoreServer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "render" {
		if err := render.RunCLI(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type options struct {
	metricsAddr, probeAddr, pprofAddr  string
	metricsSecure                      bool
	metricsCertDir                     string
	leaderElect                        bool
	leaderElectionID, leaderElectionNS string
	// operatorNamespace is where the operator's pods run (render.OperatorNamespace).
	operatorNamespace            string
	leaseDuration, renewDeadline time.Duration
	retryPeriod, syncPeriod      time.Duration
	namespaces                   string
	controller                   controller.Options
}

func parseFlags() *options {
	o := &options{}
	zapOpts := zap.Options{Development: false}
	bindFlags(flag.CommandLine, o, &zapOpts)
	flag.Parse()
	o.controller.RedisOptions.WriteTimeout = o.controller.RedisOptions.ReadTimeout
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	return o
}

// bindFlags declares the operator's flags on fs (docs/reference/flags.md is generated from
// them: go test . -run TestFlagsReference -update).
func bindFlags(fs *flag.FlagSet, o *options, zapOpts *zap.Options) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview); false serves plain HTTP to anyone, for local development.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Directory holding tls.crt and tls.key for the metrics endpoint, reloaded when they change; empty uses a self-signed certificate made at start.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address for net/http/pprof; empty disables profiling.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one of several operator replicas acts.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "redis-cluster-operator.redis.middleware.hc.cn", "Name of the Lease used for leader election.")
	fs.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the operator's own).")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits before taking over a lease.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader retries renewing before giving up.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader election is retried.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "How often every RedisCluster is reconciled even without a change.")
	fs.StringVar(&o.namespaces, "namespaces", "", "Comma-separated namespaces to watch; empty watches all.")
	fs.StringVar(&o.operatorNamespace, "operator-namespace", operatorNamespace(), "Namespace of the operator's pods, which the RedisClusters' NetworkPolicies admit to Redis (default: env POD_NAMESPACE, set by the Downward API, else the ServiceAccount's namespace file; empty: each cluster's own namespace only).")
	fs.StringVar(&o.controller.StoreImage, "backup-store-image", "", "Image of the store pods that serve PersistentVolumeClaim backup destinations (the operator's own image, run as `manager backup-store`, of this operator's version or newer: the pods serve HTTPS since it); empty: the image of the operator's own pod (env POD_NAME and POD_NAMESPACE).")
	fs.DurationVar(&o.controller.CreateTimeout, "create-timeout", 10*time.Minute, "How long Creating may last before the cluster is marked Failed.")
	fs.DurationVar(&o.controller.ScaleTimeout, "scale-timeout", 30*time.Minute, "How long Scaling may last before the cluster is marked Failed.")
	fs.DurationVar(&o.controller.UpgradeTimeout, "upgrade-timeout", 30*time.Minute, "How long Upgrading may last before the cluster is marked Failed.")
	fs.IntVar(&o.controller.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "How many RedisClusters are reconciled at once (one cluster is never reconciled twice at once); a cluster whose nodes hang holds one of them.")
	fs.DurationVar(&o.controller.HealthCheckInterval, "health-check-interval", 30*time.Second, "How often a Running cluster nobody changed is checked (CLUSTER NODES and CLUSTER INFO of every node); changes to its objects and pods are watched.")
	fs.DurationVar(&o.controller.RedisOptions.DialTimeout, "redis-dial-timeout", 2*time.Second, "Deadline for connecting to a Redis node.")
	fs.DurationVar(&o.controller.RedisOptions.ReadTimeout, "redis-timeout", 3*time.Second, "Deadline for one Redis command's reply (and for a free pooled connection); MIGRATE of a big key sets its own.")
	fs.IntVar(&o.controller.RedisOptions.PoolSize, "redis-pool-size", 4, "Most connections the operator opens to one Redis node.")
	zapOpts.BindFlags(fs)
}

// metricsOptions serves the metrics over HTTPS behind the metricsauth filter (the scraper
// needs a token allowed to GET /metrics: ClusterRole metrics-reader), or over plain HTTP
// with --metrics-secure=false.
func metricsOptions(o *options) metricsserver.Options {
	if !o.metricsSecure {
		return metricsserver.Options{BindAddress: o.metricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.metricsAddr,
		SecureServing:  true,
		FilterProvider: metricsauth.Filter,
		CertDir:        o.metricsCertDir,
		// HTTP/1.1 only: HTTP/2's stream reset and rapid reset floods
		// (CVE-2023-44487, CVE-2023-39325) need no credentials to reach the server.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}

// defaultGCPercent is the collector's target when GOGC is not set. The operator's heap is
// mostly long-lived (compiled templates, informer caches) and it allocates little between
// reconciles, so the default's headroom, a heap twice the live data, buys it little CPU:
// at 100 clusters, 40 keeps about 20 MiB less RSS for well under 1% of a core
// (bench/README.md, fleet).
const defaultGCPercent = 40

// movingGCPercent is the collector's target while a resize step moves slots
// (controller.Options.MovingGCPercent): the step allocates fast, and at 40 the collector
// took about a third of the operator's CPU while keys moved (bench/README.md, scale).
const movingGCPercent = 200

func run() error {
	o := parseFlags()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
		o.controller.MovingGCPercent = movingGCPercent
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(redisv1alpha1.AddToScheme(scheme))

	// Only Redis pods are cached: a cluster-wide pod cache would cost memory on big clusters.
	// They are cached trimmed to what the operator reads (controller.TrimPod): it never
	// writes a pod, and reads managedFields only of the objects it applies.
	redisPods, err := labels.Parse(redisv1alpha1.LabelName + "=" + redisv1alpha1.LabelNameValue)
	if err != nil {
		return fmt.Errorf("failed to parse pod selector: %w", err)
	}
	cacheOpts := cache.Options{
		SyncPeriod: &o.syncPeriod,
		ByObject:   map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: redisPods, Transform: controller.TrimPod}},
	}
	if o.namespaces != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(o.namespaces, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				cacheOpts.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	}
	mgrOpts := ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOpts,
		// Secrets are read by name only, straight from the API server (the password
		// Secret, with a get-only RBAC rule): never through the cache, which would
		// list and watch every Secret the operator can see.
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNS,
		LeaseDuration:           &o.leaseDuration,
		RenewDeadline:           &o.renewDeadline,
		RetryPeriod:             &o.retryPeriod,
		// The operator exits when it loses the lease, so a new leader never races an old one.
		LeaderElectionReleaseOnCancel: true,
		PprofBindAddress:              o.pprofAddr,
		// client-go's default spam filter drops every event about one object after 25 in a
		// few minutes (one more each 5 min): a cluster's bootstrap alone comes close, and a
		// Warning that came later (a revert, a refusal) was silently lost. 200 a burst, one
		// more every 10 s, still bounds a flapping cluster. The deprecation concerns
		// managers shorter-lived than their process; this one is the process.
		EventBroadcaster: record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 200, QPS: 0.1}), //nolint:staticcheck
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), mgrOpts)
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}
	renderer, err := render.New(render.OperatorNamespace(o.operatorNamespace))
	if err != nil {
		return fmt.Errorf("failed to compile templates: %w", err)
	}
	rec := controller.New(mgr, renderer, o.controller)
	if err := rec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up controller: %w", err)
	}
	if err := controller.NewBackupReconciler(rec).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the backup controller: %w", err)
	}
	if err := controller.NewScheduleReconciler(rec).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("failed to set up the backup schedule controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("failed to add ready check: %w", err)
	}
	ctrl.Log.Info("Starting manager", "namespaces", o.namespaces, "leaderElection", o.leaderElect, "metricsSecure", o.metricsSecure)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// serviceAccountNamespaceFile holds the namespace of a pod's ServiceAccount.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorNamespace is the default of --operator-namespace: POD_NAMESPACE (the Downward
// API, config/manager and the Helm chart), else the mounted ServiceAccount's namespace,
// else "" (outside a cluster, e.g. make run).
func operatorNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
