package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// cluster is one round's servers: the 3 masters formed (with a replica each when
// podLike), and the fourth master added (members[fourth], with its replica after it).
type cluster struct {
	servers []*redistest.Server
	members []topology.Member
	fourth  int
	podLike bool
	f       redis.Factory
	dir     string
}

// serverBinary is the server every round starts: redis-server, or with -valkey the
// valkey-server of the project's Valkey 9.1 image (redistest.ImageBinary).
var serverBinary string

// podArgs are the directives of the pods' redis.conf (templates/configmap.cue, its
// defaults) that change the cost of moving a key: every RESTORE and DEL is appended to
// the AOF, as on the pods. A replica's full sync starts at once, as on the pods.
var podArgs = []string{"--appendonly", "yes", "--repl-diskless-sync-delay", "0"}

// newCluster starts fresh servers, forms 3 masters with the operator's Bootstrap (how the
// cluster is formed is not measured) and meets a fourth, empty master. podLike servers
// are the demo RedisCluster's pods on plain processes: the pods' AOF setting, and a
// replica for each master, the fourth included (8 servers, not 4).
func newCluster(ctx context.Context, nodeTimeout time.Duration, podLike bool) (*cluster, error) {
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return nil, fmt.Errorf("failed to create a data dir: %w", err)
	}
	n, formed, replicas, rcfg := 4, 3, 0, redistest.Config{NodeTimeout: nodeTimeout, Binary: serverBinary}
	if podLike {
		n, formed, replicas, rcfg.Args = 8, 6, 1, podArgs
	}
	servers, err := redistest.StartServers(dir, n, rcfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("failed to start redis-servers: %w", err)
	}
	c := &cluster{servers: servers, dir: dir, fourth: formed, podLike: podLike,
		f: redis.NewFactory(redis.Options{ReadTimeout: 10 * time.Second})}
	for i, s := range servers {
		c.members = append(c.members, topology.Member{Pod: fmt.Sprintf("bench-%d", i), Addr: s.Addr})
	}
	if _, err := redis.Bootstrap(ctx, c.f, c.members[:formed], 3, replicas); err != nil {
		c.close()
		return nil, fmt.Errorf("failed to form 3 masters: %w", err)
	}
	for _, m := range c.members[formed:] {
		if err := c.f.For(c.members[0].Addr).Meet(ctx, m.Addr); err != nil {
			c.close()
			return nil, err
		}
	}
	if podLike {
		if err := c.replicateFourth(ctx); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// replicateFourth makes the last server the fourth master's replica, once it knows it.
func (c *cluster) replicateFourth(ctx context.Context) error {
	id, err := c.nodeID(ctx, c.fourth)
	if err != nil {
		return err
	}
	for {
		err := c.f.For(c.members[c.fourth+1].Addr).Replicate(ctx, id)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to make a replica of the fourth master: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *cluster) close() {
	c.f.Close()
	redistest.StopAll(c.servers)
	os.RemoveAll(c.dir)
}

// keepLogs copies every server's log to dir as NAME-N.log (-logs).
func (c *cluster) keepLogs(dir, name string) {
	_ = os.MkdirAll(dir, 0o755)
	for i, s := range c.servers {
		if b, err := os.ReadFile(filepath.Join(s.Dir, "redis.log")); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i)), b, 0o644)
		}
	}
}

func (c *cluster) addrs() []string { return redistest.Addrs(c.servers) }

// settle waits until every node knows every other, they agree, cluster_state is ok
// everywhere, and every replica is in sync: every method starts from the same settled
// cluster.
// After the operator's scale-in the fourth node is reset and knows only itself: the
// cluster is the members the first one knows.
func (c *cluster) settle(ctx context.Context) error {
	for {
		st, err := redis.Observe(ctx, c.f, c.inCluster(ctx))
		if err == nil && st.AllReachable() && st.AllMet() && st.Agreed() && st.ClusterOK() && st.NoOpenSlots() && c.replicasInSync(ctx, st) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster did not settle: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replicasInSync reports whether every replica's link to its master is up and loaded.
func (c *cluster) replicasInSync(ctx context.Context, st *topology.ClusterState) bool {
	for i := range st.Members {
		if self := st.Members[i].Self(); self == nil || self.Master {
			continue
		}
		r, err := c.f.For(st.Members[i].Addr).Replication(ctx)
		if err != nil || !r.LinkUp || r.Syncing {
			return false
		}
	}
	return true
}

// inCluster is the members the first member knows.
func (c *cluster) inCluster(ctx context.Context) []topology.Member {
	nodes, err := c.f.For(c.members[0].Addr).ClusterNodes(ctx)
	if err != nil {
		return c.members
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Addr()] = true
	}
	var out []topology.Member
	for _, m := range c.members {
		if known[m.Addr] {
			out = append(out, m)
		}
	}
	return out
}

// owners maps every slot to the address of the master that claims it.
func (c *cluster) owners(ctx context.Context) ([topology.SlotCount]string, error) {
	var out [topology.SlotCount]string
	st, err := redis.Observe(ctx, c.f, c.members)
	if err != nil {
		return out, err
	}
	for i := range st.Members {
		self := st.Members[i].Self()
		if self == nil || !self.Master {
			continue
		}
		for _, r := range self.Slots {
			for s := r.Start; s <= r.End; s++ {
				out[s] = st.Members[i].Addr
			}
		}
	}
	return out, nil
}

// nodeID is the ID of member i.
func (c *cluster) nodeID(ctx context.Context, i int) (string, error) {
	nodes, err := c.f.For(c.members[i].Addr).ClusterNodes(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if n.Myself {
			return n.ID, nil
		}
	}
	return "", fmt.Errorf("%s does not name itself", c.members[i].Addr)
}

// cpu is the CPU time (user + system) every server used so far.
func (c *cluster) cpu() (time.Duration, error) {
	var total time.Duration
	for _, s := range c.servers {
		d, err := procCPU(s.PID())
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// procCPU reads utime+stime of pid from /proc/PID/stat (clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("failed to read the CPU time of %d: %w", pid, err)
	}
	// The command name may hold spaces: fields are counted after its closing parenthesis.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15 of stat
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("failed to parse /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// keyName and value: key i holds value(i), 64 bytes (or -value) with i in it.
func keyName(i int) string { return "k:" + strconv.Itoa(i) }

func value(i, size int) string {
	v := strconv.Itoa(i)
	if len(v) >= size {
		return v
	}
	return strings.Repeat("0", size-len(v)) + v
}

// byOwner groups key indexes by the address owning their slot.
func byOwner(owners *[topology.SlotCount]string, names func(int) string, idx []int) map[string][]int {
	out := map[string][]int{}
	for _, i := range idx {
		a := owners[topology.KeySlot(names(i))]
		out[a] = append(out[a], i)
	}
	return out
}

// load writes keys 0..n-1 on their owners, pipelined 1000 at a time, one stream per master.
func (c *cluster) load(ctx context.Context, n, size int) error {
	owners, err := c.owners(ctx)
	if err != nil {
		return err
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return forEachOwner(byOwner(&owners, keyName, idx), func(cl *goredis.Client, ids []int) error {
		_, err := cl.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, i := range ids {
				p.Set(ctx, keyName(i), value(i, size), 0)
			}
			return nil
		})
		return err
	})
}

// lost reads every key named by names(i) for i in idx from its slot's owner and counts
// those missing, wrong (want(i)) or redirected.
func (c *cluster) lost(ctx context.Context, names func(int) string, want func(int) string, idx []int) (int, error) {
	owners, err := c.owners(ctx)
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	lost := 0
	err = forEachOwner(byOwner(&owners, names, idx), func(cl *goredis.Client, ids []int) error {
		cmds := make([]*goredis.StringCmd, len(ids))
		_, _ = cl.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for k, i := range ids {
				cmds[k] = p.Get(ctx, names(i))
			}
			return nil
		})
		n := 0
		for k, cmd := range cmds {
			if v, err := cmd.Result(); err != nil || v != want(ids[k]) {
				n++
			}
		}
		mu.Lock()
		lost += n
		mu.Unlock()
		return nil
	})
	return lost, err
}

// forEachOwner runs fn on batches of 1000 indexes per owner, owners in parallel.
func forEachOwner(groups map[string][]int, fn func(*goredis.Client, []int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(groups))
	for addr, ids := range groups {
		wg.Add(1)
		go func(addr string, ids []int) {
			defer wg.Done()
			cl := goredis.NewClient(&goredis.Options{Addr: addr, ReadTimeout: 30 * time.Second})
			defer cl.Close()
			for from := 0; from < len(ids); from += 1000 {
				if err := fn(cl, ids[from:min(from+1000, len(ids))]); err != nil {
					errs <- fmt.Errorf("on %s: %w", addr, err)
					return
				}
			}
		}(addr, ids)
	}
	wg.Wait()
	close(errs)
	return <-errs
}
