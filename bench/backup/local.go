package main

import (
	"context"
	"fmt"
	"io"
	"path"
	"sync"
	"time"

	"github.com/hc-middleware/redis-cluster-operator/bench/internal/formbench"
	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/backup"
	"github.com/hc-middleware/redis-cluster-operator/redis/rdb"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

const localPassword = "bench"

// runLocal is the comparison on loopback: 3 masters loaded, backed up by the library and
// by redis-cli --rdb, restored by the library and by redis-cli --pipe into new masters.
func runLocal(ctx context.Context, cfg config) error {
	tmp, _, store, stop, err := startStore(ctx, "127.0.0.1")
	if err != nil {
		return err
	}
	defer stop()
	src, err := localCluster(ctx, tmp, "src")
	if err != nil {
		return err
	}
	defer redistest.StopAll(src)
	r := framework.NewRouter(func(context.Context) ([]string, error) { return redistest.Addrs(src), nil }, localPassword)
	defer r.Close()
	cmds, err := load(ctx, r, cfg)
	if err != nil {
		return err
	}
	var backups, restores [][2]figures
	var objects []string
	for round := 0; round < cfg.rounds; round++ {
		var op, ref figures
		for _, first := range []bool{round%2 == 0, round%2 == 1} {
			if first {
				if op, objects, err = libBackup(ctx, r, redistest.Addrs(src), store, fmt.Sprintf("b%d", round)); err != nil {
					return err
				}
			} else if ref, err = cliBackup(ctx, r, redistest.Addrs(src), localPassword, tmp, cfg); err != nil {
				return err
			}
		}
		backups = append(backups, [2]figures{op, ref})
		fmt.Println(op)
		fmt.Println(ref)
	}
	for round := 0; round < cfg.rounds; round++ {
		var op, ref figures
		for _, first := range []bool{round%2 == 0, round%2 == 1} {
			if first {
				dst, err := localCluster(ctx, tmp, fmt.Sprintf("r%d", round))
				if err != nil {
					return err
				}
				op, err = libRestore(ctx, dst, store, objects)
				redistest.StopAll(dst)
				if err != nil {
					return err
				}
			} else if ref, err = localPipe(ctx, tmp, fmt.Sprintf("p%d", round), cmds, cfg); err != nil {
				return err
			}
		}
		restores = append(restores, [2]figures{op, ref})
		fmt.Println(op)
		fmt.Println(ref)
	}
	report(cfg, backups, restores)
	return nil
}

// localCluster starts 3 masters with a password (the host's redis-server) and forms them
// with the operator's bootstrap. They set repl-diskless-sync-delay 0 as the pods do
// (templates/configmap.cue): with Redis' default 5 s, redis-cli --rdb, which asks for a
// diskless snapshot, would wait 5 s for its fork, and the reference would be slow for a
// reason no pod has.
func localCluster(ctx context.Context, root, name string) ([]*redistest.Server, error) {
	srv, err := redistest.StartServers(path.Join(root, name), 3, redistest.Config{Password: localPassword,
		Args: []string{"--repl-diskless-sync-delay", "0"}})
	if err != nil {
		return nil, err
	}
	f := redis.NewFactory(redis.Options{Password: localPassword})
	defer f.Close()
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := redis.Bootstrap(bctx, f, formbench.Members(redistest.Addrs(srv)), 3, 0); err != nil {
		redistest.StopAll(srv)
		return nil, err
	}
	return srv, nil
}

// libBackup takes a cut with redis/backup.Take and uploads every snapshot to the store
// while reading it through the RDB reader, as the controller does, with a writer on r.
func libBackup(ctx context.Context, r *framework.Router, addrs []string, store *backup.S3, name string) (figures, []string, error) {
	f := figures{method: "operator backup (library)"}
	w, err := r.StartWriter(ctx, "w"+name)
	if err != nil {
		return f, nil, err
	}
	defer w.Stop()
	time.Sleep(500 * time.Millisecond)
	w.TakeLongestGap()
	began := time.Now()
	d := backup.Dialer{Passwords: []string{localPassword}}
	cut, snaps, err := backup.Take(ctx, d, addrs, backup.Options{})
	if err != nil {
		return f, nil, err
	}
	objects := make([]string, len(snaps))
	keys := make([]int64, len(snaps))
	sizes := make([]int64, len(snaps))
	errs := make([]error, len(snaps))
	var wg sync.WaitGroup
	for i, s := range snaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			if errs[i] = s.Open(2 * time.Minute); errs[i] != nil {
				return
			}
			objects[i] = path.Join("bench", name, fmt.Sprintf("shard-%d.rdb", i))
			pr, pw := io.Pipe()
			scanned := make(chan error, 1)
			go func() {
				_, err := rdb.Scan(pr, func(*rdb.Entry) error { keys[i]++; return nil })
				_, _ = io.Copy(io.Discard, pr)
				scanned <- err
			}()
			up, err := store.Put(ctx, "backups", objects[i], io.TeeReader(s, pw), func(int64) {})
			pw.Close()
			if serr := <-scanned; err == nil {
				err = serr
			}
			errs[i], sizes[i] = err, up.Size
		}()
	}
	wg.Wait()
	f.took = time.Since(began)
	f.gap = w.TakeLongestGap()
	f.pause = cut.Paused.Round(time.Microsecond).String()
	for i := range snaps {
		if errs[i] != nil {
			return f, nil, errs[i]
		}
		f.keys += keys[i]
		f.bytes += sizes[i]
	}
	return f, objects, nil
}

// libRestore restores the objects into dst with redis/backup.Restore.
func libRestore(ctx context.Context, dst []*redistest.Server, store *backup.S3, objects []string) (figures, error) {
	f := figures{method: "operator restore (library)"}
	var sources []func() (io.ReadCloser, error)
	for _, o := range objects {
		sources = append(sources, func() (io.ReadCloser, error) { return store.Get(ctx, "backups", o) })
	}
	var p backup.Progress
	began := time.Now()
	err := backup.Restore(ctx, backup.RestoreTarget{Addrs: redistest.Addrs(dst), Dialer: backup.Dialer{Passwords: []string{localPassword}}}, sources, &p)
	f.took, f.keys, f.bytes = time.Since(began), p.Keys.Load(), p.Bytes.Load()
	if err != nil {
		return f, err
	}
	commandStats(redistest.Addrs(dst), localPassword, "restore", "set")
	n, err := dbsize(ctx, framework.NewRouter(func(context.Context) ([]string, error) { return redistest.Addrs(dst), nil }, localPassword))
	if err != nil {
		return f, err
	}
	if n != f.keys {
		return f, fmt.Errorf("the restored masters hold %d keys, the restore says %d", n, f.keys)
	}
	return f, nil
}

// localPipe loads cmds with redis-cli --pipe into 3 new masters.
func localPipe(ctx context.Context, root, name string, cmds [][]any, cfg config) (figures, error) {
	dst, err := localCluster(ctx, root, name)
	if err != nil {
		return figures{}, err
	}
	defer redistest.StopAll(dst)
	r := framework.NewRouter(func(context.Context) ([]string, error) { return redistest.Addrs(dst), nil }, localPassword)
	defer r.Close()
	return cliPipe(ctx, r, localPassword, cmds, cfg)
}
