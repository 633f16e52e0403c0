package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/go-redis/redis/v8"

	"github.com/hc-middleware/redis-cluster-operator/redis"
	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// cluster is one round's servers: members[:3] the masters formed, members[3] the one added.
type cluster struct {
	servers []*redistest.Server
	members []topology.Member
	f       redis.Factory
	dir     string
}

// newCluster starts 4 fresh servers, forms the first 3 as masters with the operator's
// Bootstrap (how the cluster is formed is not measured) and meets the fourth, empty.
func newCluster(ctx context.Context, nodeTimeout time.Duration) (*cluster, error) {
	dir, err := os.MkdirTemp("", "bench-scale-")
	if err != nil {
		return nil, fmt.Errorf("failed to create a data dir: %w", err)
	}
	servers, err := redistest.StartServers(dir, 4, redistest.Config{NodeTimeout: nodeTimeout})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("failed to start redis-servers: %w", err)
	}
	c := &cluster{servers: servers, dir: dir, f: redis.NewFactory(redis.Options{ReadTimeout: 10 * time.Second})}
	for i, s := range servers {
		c.members = append(c.members, topology.Member{Pod: fmt.Sprintf("bench-%d", i), Addr: s.Addr})
	}
	if _, err := redis.Bootstrap(ctx, c.f, c.members[:3], 3, 0); err != nil {
		c.close()
		return nil, fmt.Errorf("failed to form 3 masters: %w", err)
	}
	if err := c.f.For(c.members[0].Addr).Meet(ctx, c.members[3].Addr); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *cluster) close() {
	c.f.Close()
	redistest.StopAll(c.servers)
	os.RemoveAll(c.dir)
}

func (c *cluster) addrs() []string { return redistest.Addrs(c.servers) }

// settle waits until every node knows every other, they agree, and cluster_state is ok
// everywhere: both methods start from the same settled cluster.
// After the operator's scale-in the fourth node is reset and knows only itself: the
// cluster is the members the first one knows.
func (c *cluster) settle(ctx context.Context) error {
	for {
		st, err := redis.Observe(ctx, c.f, c.inCluster(ctx))
		if err == nil && st.AllReachable() && st.AllMet() && st.Agreed() && st.ClusterOK() && st.NoOpenSlots() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster did not settle: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
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
