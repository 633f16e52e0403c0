package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// backupPlan is what a backup needs, resolved from its spec.
type backupPlan struct {
	dialer backup.Dialer
	addrs  []string
	store  backup.Store
	dest   destination
	// dir is PREFIX/NAMESPACE/NAME, where the objects go.
	dir string
}

// prepare resolves the cluster, its nodes and credentials, and the store; a reason not
// empty says why the backup must wait.
func (r *BackupReconciler) prepare(ctx context.Context, b *redisv1alpha1.RedisClusterBackup) (*backupPlan, string, string, error) {
	rc := &redisv1alpha1.RedisCluster{}
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterName}
	if err := r.Client.Get(ctx, key, rc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, ReasonClusterNotFound, fmt.Sprintf("no RedisCluster %q in namespace %s", key.Name, key.Namespace), nil
		}
		return nil, "", "", err
	}
	if rc.Status.Phase != redisv1alpha1.PhaseRunning {
		return nil, ReasonClusterNotRunning, fmt.Sprintf("RedisCluster %s is %s; a backup waits for Running", rc.Name, rc.Status.Phase), nil
	}
	creds, ok := r.redis.credsOf(key)
	if !ok {
		return nil, ReasonClusterNotRunning, fmt.Sprintf("RedisCluster %s has not been reconciled by this operator process yet", rc.Name), nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(rc.Namespace), client.MatchingLabels(redisv1alpha1.SelectorLabels(rc.Name))); err != nil {
		return nil, "", "", err
	}
	var addrs []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			addrs = append(addrs, net.JoinHostPort(p.Status.PodIP, "6379"))
		}
	}
	if len(addrs) < int(rc.Spec.Replicas) {
		return nil, ReasonClusterNotRunning, fmt.Sprintf("%d of %d pods have an address", len(addrs), rc.Spec.Replicas), nil
	}
	dest := destinationOf(b, "")
	store, reason, msg, err := r.openStore(ctx, b, backupStorePod(b), dest)
	if err != nil || reason != "" {
		return nil, reason, msg, err
	}
	passwords := []string{creds.password}
	if creds.previous != "" {
		passwords = append(passwords, creds.previous)
	}
	return &backupPlan{
		dialer: backup.Dialer{User: creds.user, Passwords: passwords, TLS: creds.tlsConfig},
		addrs:  addrs, store: store, dest: dest,
		dir: backupDir(b),
	}, "", "", nil
}

// s3Store is the client of the store d names, its credentials (and CA) read from
// Secrets of namespace ns, checked with HEAD on the bucket; a reason not empty
// (ReasonSecretMissing, ReasonS3AccessDenied, ReasonS3Error) says why it cannot be used. field prefixes the
// names of the fields a message cites ("spec.s3").
func s3Store(ctx context.Context, reader client.Reader, ns string, d redisv1alpha1.S3Destination, field string) (*backup.S3, string, string, error) {
	access, missing, err := readSecretKey(ctx, reader, ns, d.CredentialsSecret.Name, redisv1alpha1.S3AccessKeyIDKey, field+".credentialsSecret")
	if err != nil || missing != "" {
		return nil, ReasonSecretMissing, missing, err
	}
	secret, missing, err := readSecretKey(ctx, reader, ns, d.CredentialsSecret.Name, redisv1alpha1.S3SecretAccessKeyKey, field+".credentialsSecret")
	if err != nil || missing != "" {
		return nil, ReasonSecretMissing, missing, err
	}
	s3 := &backup.S3{Endpoint: d.Endpoint, Region: d.Region, AccessKey: access, SecretKey: secret}
	if d.CASecret != nil {
		ca, missing, err := readSecretKey(ctx, reader, ns, d.CASecret.Name, d.CASecret.Key, field+".caSecret")
		if err != nil || missing != "" {
			return nil, ReasonSecretMissing, missing, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, ReasonSecretMissing, field + ".caSecret: no PEM certificate in the key", nil
		}
		s3.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s3.HeadBucket(hctx, d.Bucket); err != nil {
		reason := ReasonS3Error
		if permanentRestoreFailure(err) == ReasonS3AccessDenied {
			reason = ReasonS3AccessDenied
		}
		return nil, reason, fmt.Sprintf("bucket %s at %s: %v", d.Bucket, d.Endpoint, err), nil
	}
	return s3, "", "", nil
}
