package render

import (
	"testing"
)

// BenchmarkRender measures one full render of the seed's sample on a Renderer compiled
// once: encode the CR, fill and evaluate the templates, validate, decode. The cache is
// bypassed; BenchmarkRenderCached is the repeat render of an unchanged CR. Run:
//
//	go test -bench Render -benchmem -run '^$' ./render/ -cpu 1
func BenchmarkRender(b *testing.B) {
	benchmarkRender(b, false)
}

// BenchmarkRenderCached is what a reconcile of an unchanged CR pays: encode, hash,
// decode the cached JSON.
func BenchmarkRenderCached(b *testing.B) {
	benchmarkRender(b, true)
}

func benchmarkRender(b *testing.B, useCache bool) {
	r := newRenderer(b)
	clusters, err := ReadFile("../config/samples/seed_rediscluster.yaml")
	if err != nil {
		b.Fatal(err)
	}
	rc := clusters[0]
	want, err := r.render(rc, "", false)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := processCPU()
	for b.Loop() {
		objs, err := r.render(rc, "", useCache)
		if err != nil {
			b.Fatal(err)
		}
		if len(objs) != len(want) {
			b.Fatalf("got %d objects, want %d", len(objs), len(want))
		}
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkCompile is what New costs, once per process.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(); err != nil {
			b.Fatal(err)
		}
	}
}
