package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
)

// restoreSource resolves spec.restoreFrom: the backup, which must have Succeeded, and a
// client of its store (for a PersistentVolumeClaim, through a store pod the cluster
// owns, deleted once the restore is over: releaseRestoreStore); a reason not empty says
// why the restore cannot start.
func (r *Reconciler) restoreSource(ctx context.Context, rc *redisv1alpha1.RedisCluster) (*redisv1alpha1.RedisClusterBackup, backup.Store, string, string, error) {
	name := rc.Spec.RestoreFrom.Backup
	b := &redisv1alpha1.RedisClusterBackup{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rc.Namespace, Name: name}, b); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil, ReasonBackupNotFound, fmt.Sprintf("spec.restoreFrom.backup: no RedisClusterBackup %q in namespace %s", name, rc.Namespace), nil
		}
		return nil, nil, "", "", fmt.Errorf("failed to get RedisClusterBackup %s: %w", name, err)
	}
	if b.Status.Phase != redisv1alpha1.BackupSucceeded || len(b.Status.Shards) == 0 {
		msg := fmt.Sprintf("spec.restoreFrom.backup: RedisClusterBackup %s is %s, not Succeeded", name, phaseOrPending(b.Status.Phase))
		if b.Status.Reason != "" {
			msg += " (" + b.Status.Reason + ")"
		}
		return nil, nil, ReasonBackupNotSucceeded, msg, nil
	}
	store, reason, msg, err := r.openStore(ctx, rc, restoreStorePod(rc.Name), destinationOf(b, "RedisClusterBackup "+name+": "))
	return b, store, reason, msg, err
}

// clusterHoldsKeys refuses a cluster a node of which holds keys (the reason is
// ReasonClusterNotEmpty), before the restore starts.
func (r *Reconciler) clusterHoldsKeys(ctx context.Context, s *scope) (string, string, error) {
	f := r.factoryFor(s)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var holding []string
	var errs []error
	for _, m := range s.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := f.For(m.Addr).DBSize(ctx)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("DBSIZE on %s: %w", m.Pod, err))
			case n > 0:
				holding = append(holding, fmt.Sprintf("%s holds %d keys", m.Pod, n))
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return "", "", errs[0]
	}
	if len(holding) > 0 {
		return ReasonClusterNotEmpty, strings.Join(holding, ", ") + "; a restore writes only into an empty cluster unless spec.restoreFrom.replace is true", nil
	}
	return "", "", nil
}

// dialerOf authenticates as the cluster's reconcile does.
func dialerOf(c credentials) backup.Dialer {
	passwords := []string{c.password}
	if c.previous != "" {
		passwords = append(passwords, c.previous)
	}
	return backup.Dialer{User: c.user, Passwords: passwords, TLS: c.tlsConfig}
}

func cutTime(b *redisv1alpha1.RedisClusterBackup) string {
	if b.Status.CutStartedAt == nil {
		return "an unknown time"
	}
	return b.Status.CutStartedAt.UTC().Format(time.RFC3339Nano)
}

func phaseOrPending(p redisv1alpha1.BackupPhase) string {
	if p == "" {
		return "not started"
	}
	return string(p)
}

// releaseRestoreStore deletes the store pod a restore from a PersistentVolumeClaim read
// through, once the restore is over (it would go with the cluster anyway).
func (r *Reconciler) releaseRestoreStore(ctx context.Context, rc *redisv1alpha1.RedisCluster) {
	if err := r.releaseStore(ctx, rc.Namespace, restoreStorePod(rc.Name)); err != nil {
		log.FromContext(ctx).Error(err, "Failed to delete the restore's store pod", "pod", restoreStorePod(rc.Name))
	}
}
