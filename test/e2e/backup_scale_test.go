//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/hc-middleware/redis-cluster-operator/api/v1alpha1"
	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// The scale of TestBackupAMillionKeys: the million keys of mixed types and one
// sorted set of two million members.
const (
	bigBackupKeys     = 1000000
	bigBackupZMembers = 2000000
)

// TestBackupAMillionKeys loads 1,000,000 keys of every type (strings raw and integer,
// hashes, lists, sets and intsets, sorted sets, streams; a quarter with an expiry) and one
// sorted set of 2,000,000 members into 3 masters while a writer runs, backs them up with a
// RedisClusterBackup to a real S3 server, keeps writing, and restores the backup by the
// operator (spec.restoreFrom) into a new cluster of 3 masters and one of 5. In both, every
// key loaded is there with its content and its exact expiry (RESTORE … ABSTTL keeps the
// millisecond), every write acknowledged before the cut is there, none sent after it is,
// and redis-cli --cluster check passes.
func TestBackupAMillionKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "backup-scale"
	operator(t)
	testNamespace(ctx, t, ns)
	testBegan := time.Now()
	// 3 masters without replicas, with room for the big sorted set (about 250 MB on its
	// master) and a fork's copy-on-write while the snapshot is written.
	bigPods := func(name string, masters int, restoreFrom string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			u.SetName(name)
			spec := u.Object["spec"].(map[string]any)
			spec["replicas"], spec["replicasPerMaster"] = int64(masters), int64(0)
			pod := spec["pod"].([]any)[0].(map[string]any)
			pod["env"] = []any{map[string]any{"name": "MAXMEMORY", "value": "900mb"}}
			pod["resources"] = map[string]any{
				"requests": map[string]any{"cpu": "50m", "memory": "64Mi"},
				"limits":   map[string]any{"cpu": "1", "memory": "1280Mi"},
			}
			if restoreFrom != "" {
				spec["restoreFrom"] = map[string]any{"backup": restoreFrom}
			}
		}
	}
	applyCluster(ctx, t, demoSample, ns, bigPods("src", 3, ""))
	s3srv, _ := s3Store(ctx, t, ns)
	if err := stack.WaitForPhase(ctx, ns, "src", "Running", formTime); err != nil {
		t.Fatal(err)
	}
	formed := time.Since(testBegan)

	r := stack.RouterFor(ns, "src", "")
	defer r.Close()
	w, err := r.StartWriter(ctx, "wr")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	expireBase := time.Now().Add(2 * time.Hour).UnixMilli()
	var cmds [][]any
	for i := 0; i < bigBackupKeys; i++ {
		cmds = append(cmds, bigBackupWrite(i)...)
		if i%4 == 0 {
			k := bigBackupKey(i)
			cmds = append(cmds, []any{"pexpireat", k, expireBase + int64(i)})
		}
	}
	for start := 0; start < bigBackupZMembers; start += 5000 {
		args := []any{"zadd", "zbig"}
		for i := start; i < start+5000; i++ {
			args = append(args, i, "member:"+strconv.Itoa(i))
		}
		cmds = append(cmds, args)
	}
	res, err := r.Pipeline(ctx, cmds, 500)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range res {
		if c.Err() != nil {
			t.Fatalf("%v: %v", cmds[i][:2], c.Err())
		}
	}
	loaded := time.Since(began)
	t.Logf("loaded %d keys and a %d-member sorted set (%d commands, pipelined) in %v while the writer ran",
		bigBackupKeys, bigBackupZMembers, len(cmds), loaded.Round(time.Millisecond))
	cmds, res = nil, nil

	loadGap := w.TakeLongestGap()
	b, took := takeBackup(ctx, t, ns, "big", "src", s3srv.Endpoint)
	t.Logf("backup: %d keys, %.1f MB in %v (from apply to Succeeded, polled every 200 ms): %.0f keys/s, %.1f MB/s; writes paused %s, the writer's longest gap %v (%v while loading)",
		b.Status.Progress.Keys, float64(b.Status.Progress.Bytes)/1e6, took.Round(time.Millisecond),
		float64(b.Status.Progress.Keys)/took.Seconds(), float64(b.Status.Progress.Bytes)/1e6/took.Seconds(), b.Status.WritePause,
		w.TakeLongestGap().Round(time.Millisecond), loadGap.Round(time.Millisecond))
	if b.Status.Progress.Keys < bigBackupKeys+1 {
		t.Fatalf("backup holds %d keys, fewer than the %d loaded", b.Status.Progress.Keys, bigBackupKeys+1)
	}
	// Both restores start now, while the writer still writes to the source.
	shapes := []struct {
		name    string
		masters int
	}{{"r3", 3}, {"r5", 5}}
	for _, s := range shapes {
		applyCluster(ctx, t, demoSample, ns, bigPods(s.name, s.masters, "big"))
	}
	time.Sleep(time.Second) // writes after the cut, for certain
	rep := w.Stop()
	t.Logf("writer: %v", rep)
	if rep.Acked == 0 {
		t.Fatal("the writer wrote nothing")
	}
	before, after := splitAtCut(w, b)
	if len(after) == 0 {
		t.Fatal("no write was sent after the cut: the test would prove nothing about it")
	}

	for _, s := range shapes {
		restoredByOperator(ctx, t, ns, s.name, s.masters)
		rr := stack.RouterFor(ns, s.name, "")
		checked := time.Now()
		if err := checkBigBackupKeys(ctx, rr, expireBase); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		missing, err := rr.Missing(ctx, before)
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Fatalf("%s: %d of %d writes acknowledged before the cut are missing, e.g. %v", s.name, len(missing), len(before), missing[:min(5, len(missing))])
		}
		noneAfterCut(ctx, t, rr, s.name, after)
		rr.Close()
		addrs, err := stack.PodAddrs(ctx, ns, redisv1alpha1.SelectorString(s.name))
		if err != nil {
			t.Fatal(err)
		}
		password, err := stack.Password(ctx, ns, s.name)
		if err != nil {
			t.Fatal(err)
		}
		clusterCheck(t, s.name, addrs[0], password)
		t.Logf("%s: %d keys with content and expiry, the %d-member sorted set, %d writes acknowledged before the cut present, %d sent after it absent, cluster check OK (checked in %v)",
			s.name, bigBackupKeys, bigBackupZMembers, len(before), len(after), time.Since(checked).Round(time.Millisecond))
	}
	t.Logf("source formed in %v, loaded in %v, backed up in %v; whole test %v", formed.Round(time.Second), loaded.Round(time.Millisecond),
		took.Round(time.Millisecond), time.Since(testBegan).Round(time.Second))
}

// bigBackupKey is the name of the i-th key; its type and content follow from i (bigBackupWrite).
func bigBackupKey(i int) string { return "m:" + strconv.Itoa(i) }

// bigBackupWrite is the command writing key i: 60% strings (a tenth of them integers), then
// 10% each hashes, lists and sets (half of them intsets), 5% sorted sets, 5% streams.
func bigBackupWrite(i int) [][]any {
	k, n := bigBackupKey(i), strconv.Itoa(i)
	switch i % 20 {
	case 12, 13:
		return [][]any{{"hset", k, "a", "x" + n, "b", n, "c", "z"}}
	case 14, 15:
		return [][]any{{"rpush", k, n, "y", "z" + n}}
	case 16:
		return [][]any{{"sadd", k, "p" + n, "q", "r"}}
	case 17:
		return [][]any{{"sadd", k, i, i + 1, i + 2}}
	case 18:
		return [][]any{{"zadd", k, 1, "a" + n, 2.5, "b"}}
	case 19:
		return [][]any{{"xadd", k, n + "-1", "f", n}}
	case 11:
		return [][]any{{"set", k, i}}
	}
	return [][]any{{"set", k, framework.Value(k)}}
}

// checkBigBackupKeys reads back every key of bigBackupWrite with its expiry, and the big sorted
// set's size and a few of its scores.
func checkBigBackupKeys(ctx context.Context, r *framework.Router, expireBase int64) error {
	var cmds [][]any
	for i := 0; i < bigBackupKeys; i++ {
		k := bigBackupKey(i)
		switch i % 20 {
		case 12, 13:
			cmds = append(cmds, []any{"hmget", k, "a", "b", "c"})
		case 14, 15:
			cmds = append(cmds, []any{"lrange", k, 0, -1})
		case 16, 17:
			cmds = append(cmds, []any{"smembers", k})
		case 18:
			cmds = append(cmds, []any{"zrange", k, 0, -1, "withscores"})
		case 19:
			cmds = append(cmds, []any{"xrange", k, "-", "+"})
		default:
			cmds = append(cmds, []any{"get", k})
		}
		cmds = append(cmds, []any{"pexpiretime", k})
	}
	cmds = append(cmds, []any{"zcard", "zbig"}, []any{"zscore", "zbig", "member:0"}, []any{"zscore", "zbig", "member:1999999"}, []any{"zscore", "zbig", "member:1234567"})
	res, err := r.Pipeline(ctx, cmds, 1000)
	if err != nil {
		return err
	}
	bad := 0
	var first string
	note := func(format string, args ...any) {
		if bad++; bad == 1 {
			first = fmt.Sprintf(format, args...)
		}
	}
	for i := 0; i < bigBackupKeys; i++ {
		v, e := res[2*i], res[2*i+1]
		k, n := bigBackupKey(i), strconv.Itoa(i)
		if v.Err() != nil {
			note("%s: %v", k, v.Err())
			continue
		}
		var got, want string
		switch i % 20 {
		case 12, 13:
			got, want = fmt.Sprint(v.Val()), fmt.Sprint([]any{"x" + n, n, "z"})
		case 14, 15:
			got, want = fmt.Sprint(v.Val()), fmt.Sprint([]any{n, "y", "z" + n})
		case 16, 17:
			m, _ := v.StringSlice()
			slices.Sort(m)
			w := []string{"p" + n, "q", "r"}
			if i%20 == 17 {
				w = []string{n, strconv.Itoa(i + 1), strconv.Itoa(i + 2)}
			}
			slices.Sort(w)
			got, want = fmt.Sprint(m), fmt.Sprint(w)
		case 18:
			got, want = fmt.Sprint(v.Val()), fmt.Sprint([]any{"a" + n, "1", "b", "2.5"})
		case 19:
			got, want = fmt.Sprint(v.Val()), fmt.Sprint([]any{[]any{n + "-1", []any{"f", n}}})
		case 11:
			got, want = fmt.Sprint(v.Val()), n
		default:
			got, want = fmt.Sprint(v.Val()), framework.Value(k)
		}
		if got != want {
			note("%s: %s, want %s", k, got, want)
		}
		wantExp := int64(-1)
		if i%4 == 0 {
			wantExp = expireBase + int64(i)
		}
		if exp, err := e.Int64(); err != nil || exp != wantExp {
			note("%s: PEXPIRETIME %d (%v), want %d", k, exp, err, wantExp)
		}
	}
	z := res[2*bigBackupKeys:]
	if n, err := z[0].Int64(); err != nil || n != bigBackupZMembers {
		note("zbig: %d members (%v), want %d", n, err, bigBackupZMembers)
	}
	for j, want := range []string{"0", "1999999", "1234567"} {
		if s, err := z[1+j].Text(); err != nil || s != want {
			note("zbig: score %q (%v), want %s", s, err, want)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d keys differ, first %s", bad, first)
	}
	return nil
}
