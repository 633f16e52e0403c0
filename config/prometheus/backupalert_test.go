package prometheus_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"sigs.k8s.io/yaml"
)

// TestBackupAlertFiresWhenBackupsStop evaluates RedisClusterBackupsNotSucceeding as the
// rule file has it, with Prometheus' own PromQL engine, every minute over 12 hours of the
// operator's metrics, its `for` applied as a rule group applies it (firing once the
// expression has returned the cluster at every evaluation for that long). A cluster backed
// up every hour (interval 1 h: two intervals and 10 minutes is 2 h 10 min) never fires;
// one whose backups stop after its third fires 2 h 10 min after that success plus the
// `for`, not before; one whose schedule never had a success fires after the `for` alone;
// one with backups but no schedule never fires. The engine reads the series from memory
// (memSeries): Prometheus' own test storage would bring its whole service discovery in.
func TestBackupAlertFiresWhenBackupsStop(t *testing.T) {
	expr, hold := alertRule(t, "RedisClusterBackupsNotSucceeding")
	if hold != 30*time.Minute {
		t.Fatalf("the alert holds %v; docs/backup.md and runbooks.md say 30 minutes", hold)
	}
	var db memSeries
	interval := func(cluster string) {
		db.add(func(time.Duration) (float64, bool) { return 3600, true },
			"__name__", "redis_operator_backup_schedule_interval_seconds", "namespace", "shop", "name", cluster, "schedule", "hourly")
	}
	// lastSuccess is the gauge of a cluster whose backups succeed 5 minutes into each of
	// its first n hours: absent before the first, then the last success's time.
	lastSuccess := func(cluster string, n int) {
		db.add(func(at time.Duration) (float64, bool) {
			h := min(int((at-5*time.Minute)/time.Hour), n-1)
			return float64(h*3600 + 300), at >= 5*time.Minute
		}, "__name__", "redis_operator_backup_last_success_timestamp_seconds", "namespace", "shop", "name", cluster)
	}
	interval("ok")
	lastSuccess("ok", 12)
	interval("stopped")
	lastSuccess("stopped", 3)
	interval("never")
	lastSuccess("unscheduled", 12)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1 << 20, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	storage := db.queryable()

	activeSince := map[string]time.Duration{}
	firstFiring := map[string]time.Duration{}
	for at := time.Duration(0); at <= 12*time.Hour; at += time.Minute {
		q, err := engine.NewInstantQuery(context.Background(), storage, nil, expr, time.Unix(0, 0).Add(at))
		if err != nil {
			t.Fatal(err)
		}
		res := q.Exec(context.Background())
		if res.Err != nil {
			t.Fatalf("at %v: %v", at, res.Err)
		}
		vec, err := res.Vector()
		if err != nil {
			t.Fatal(err)
		}
		active := map[string]bool{}
		for _, s := range vec {
			active[s.Metric.Get("name")] = true
		}
		for name := range activeSince {
			if !active[name] {
				delete(activeSince, name) // resolved: a later return starts over
			}
		}
		for name := range active {
			if _, ok := activeSince[name]; !ok {
				activeSince[name] = at
			}
			if _, ok := firstFiring[name]; !ok && at-activeSince[name] >= hold {
				firstFiring[name] = at
			}
		}
		q.Close()
	}
	last := 2*time.Hour + 5*time.Minute
	want := map[string]time.Duration{
		// The first minute after 2 h 10 min past the last success, then 30 minutes: 4h46m,
		// as docs/backup.md says.
		"stopped": last + 2*time.Hour + 10*time.Minute + time.Minute + 30*time.Minute,
		"never":   30 * time.Minute,
	}
	for name, at := range firstFiring {
		if want[name] != at {
			t.Errorf("%s fired at %v; want %v", name, at, want[name])
		}
	}
	for name, at := range want {
		if _, ok := firstFiring[name]; !ok {
			t.Errorf("%s never fired; want at %v", name, at)
		}
	}
	t.Logf("fired: %v (for %v)", firstFiring, hold)
}

// alertRule is the expression and the for duration of the alert named name.
func alertRule(t *testing.T, name string) (string, time.Duration) {
	t.Helper()
	data, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Spec.Groups {
		i := slices.IndexFunc(g.Rules, func(r struct {
			Alert  string
			Expr   string
			For    string
			Labels map[string]string
		}) bool {
			return r.Alert == name
		})
		if i < 0 {
			continue
		}
		hold, err := model.ParseDuration(g.Rules[i].For)
		if err != nil {
			t.Fatalf("alert %s: for %q: %v", name, g.Rules[i].For, err)
		}
		return g.Rules[i].Expr, time.Duration(hold)
	}
	t.Fatalf("no alert %s in prometheusrule.yaml", name)
	return "", 0
}

// memSeries are series sampled every minute over 12 hours, each from a function of the
// time (false: no sample), served to the PromQL engine as a storage.
type memSeries []storage.Series

func (m *memSeries) add(value func(at time.Duration) (float64, bool), nameValues ...string) {
	var samples []chunks.Sample
	for at := time.Duration(0); at <= 12*time.Hour; at += time.Minute {
		if v, ok := value(at); ok {
			samples = append(samples, sample{t: at.Milliseconds(), f: v})
		}
	}
	*m = append(*m, storage.NewListSeries(labels.FromStrings(nameValues...), samples))
}

func (m memSeries) queryable() storage.Queryable {
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			out := &seriesSet{}
			for _, s := range m {
				if slices.IndexFunc(matchers, func(mt *labels.Matcher) bool { return !mt.Matches(s.Labels().Get(mt.Name)) }) < 0 {
					out.series = append(out.series, s)
				}
			}
			slices.SortFunc(out.series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return out
		}}}
}

// seriesSet hands out series in order; i is one past the series At returns.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i <= len(s.series) }
func (s *seriesSet) At() storage.Series                { return s.series[s.i-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }
