package main

import (
	"bytes"
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
	tmp, s3srv, store, stop, err := startStore(ctx, "127.0.0.1")
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
	data, err := load(ctx, r, cfg)
	if err != nil {
		return err
	}
	var backups, restores [][]figures
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
		backups = append(backups, []figures{op, ref})
		fmt.Println(op)
		fmt.Println(ref)
	}
	methods := []func(round int) (figures, error){
		func(round int) (figures, error) {
			return withCluster(ctx, tmp, fmt.Sprintf("r%d", round), func(dst []*redistest.Server) (figures, error) {
				return libRestore(ctx, dst, store.Get, s3srv.PID(), objects, "operator restore (library)", 0)
			})
		},
		func(round int) (figures, error) {
			return withCluster(ctx, tmp, fmt.Sprintf("m%d", round), func(dst []*redistest.Server) (figures, error) {
				return memRestore(ctx, dst, store, objects, 0)
			})
		},
	}
	if cfg.inFlight > 0 {
		methods = append(methods, func(round int) (figures, error) {
			return withCluster(ctx, tmp, fmt.Sprintf("i%d", round), func(dst []*redistest.Server) (figures, error) {
				return memRestore(ctx, dst, store, objects, cfg.inFlight)
			})
		})
	}
	methods = append(methods,
		func(round int) (figures, error) { return localPipe(ctx, tmp, fmt.Sprintf("p%d", round), data, cfg) })
	for round := 0; round < cfg.rounds; round++ {
		fs := make([]figures, len(methods))
		// Who goes first rotates.
		for k := range methods {
			i := (round + k) % len(methods)
			if fs[i], err = methods[i](round); err != nil {
				return err
			}
		}
		restores = append(restores, fs)
		for _, f := range fs {
			fmt.Println(f)
		}
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

// withCluster runs fn on 3 new masters, stopped after.
func withCluster(ctx context.Context, root, name string, fn func([]*redistest.Server) (figures, error)) (figures, error) {
	dst, err := localCluster(ctx, root, name)
	if err != nil {
		return figures{}, err
	}
	defer redistest.StopAll(dst)
	return fn(dst)
}

// libRestore restores the objects, read with get, into dst with redis/backup.Restore;
// storePID is the store's process (0: none), whose CPU time the restore costs too.
func libRestore(ctx context.Context, dst []*redistest.Server, get func(ctx context.Context, bucket, key string) (io.ReadCloser, error),
	storePID int, objects []string, method string, inFlight int) (figures, error) {
	f := figures{method: method}
	var sources []func() (io.ReadCloser, error)
	for _, o := range objects {
		sources = append(sources, func() (io.ReadCloser, error) { return get(ctx, "backups", o) })
	}
	var p backup.Progress
	addrs := redistest.Addrs(dst)
	srv0, self0, store0 := serversCPU(addrs, localPassword), selfCPU(), procCPU(storePID)
	began := time.Now()
	err := backup.Restore(ctx, backup.RestoreTarget{Addrs: addrs, Dialer: backup.Dialer{Passwords: []string{localPassword}}, InFlight: inFlight}, sources, &p)
	f.took, f.keys, f.bytes = time.Since(began), p.Keys.Load(), p.Bytes.Load()
	f.cpu = cpuUse{client: selfCPU() - self0, servers: serversCPU(addrs, localPassword) - srv0}
	if storePID != 0 {
		f.cpu.store = procCPU(storePID) - store0
	}
	if err != nil {
		return f, err
	}
	commandStats(addrs, localPassword, "restore", "set")
	n, err := dbsize(ctx, framework.NewRouter(func(context.Context) ([]string, error) { return addrs, nil }, localPassword))
	if err != nil {
		return f, err
	}
	if n != f.keys {
		return f, fmt.Errorf("the restored masters hold %d keys, the restore says %d", n, f.keys)
	}
	return f, nil
}

// memRestore is libRestore from the objects read into memory beforehand, untimed, as the
// reference's protocol is built beforehand: what the restore costs without the store.
func memRestore(ctx context.Context, dst []*redistest.Server, store *backup.S3, objects []string, inFlight int) (figures, error) {
	mem := map[string][]byte{}
	for _, o := range objects {
		rc, err := store.Get(ctx, "backups", o)
		if err != nil {
			return figures{}, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return figures{}, err
		}
		mem[o] = b
	}
	get := func(_ context.Context, _, key string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(mem[key])), nil
	}
	method := "operator restore (memory)"
	if inFlight > 0 {
		method = fmt.Sprintf("operator (memory, %d)", inFlight)
	}
	return libRestore(ctx, dst, get, 0, objects, method, inFlight)
}

// localPipe loads data with redis-cli --pipe into 3 new masters.
func localPipe(ctx context.Context, root, name string, data dataset, cfg config) (figures, error) {
	dst, err := localCluster(ctx, root, name)
	if err != nil {
		return figures{}, err
	}
	defer redistest.StopAll(dst)
	r := framework.NewRouter(func(context.Context) ([]string, error) { return redistest.Addrs(dst), nil }, localPassword)
	defer r.Close()
	return cliPipe(ctx, r, localPassword, data, cfg)
}
