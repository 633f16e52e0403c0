package render

import (
	"bytes"
	"sync"
	"testing"
)

// TestConcurrentRender renders every case from many goroutines on one Renderer (the
// operator shares one across reconciles) and checks each result equals the serial
// one. Half the workers bypass the cache so the shared cue.Value is evaluated
// concurrently. Run with -race: the compiled value must only be read.
func TestConcurrentRender(t *testing.T) {
	r := newRenderer(t)
	cases := renderCases(t)
	want := make([][]byte, len(cases))
	for i, c := range cases {
		want[i] = renderCaseYAML(t, r, c, false)
	}
	const workers, rounds = 8, 2
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; n < rounds; n++ {
				for i := range cases {
					c := cases[(i+w)%len(cases)]
					if got := renderCaseYAML(t, r, c, w%2 == 0); !bytes.Equal(got, want[(i+w)%len(cases)]) {
						t.Errorf("worker %d: concurrent render of %s differs from the serial one", w, c.name)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
}

func renderCaseYAML(t testing.TB, r *Renderer, c renderCase, useCache bool) []byte {
	clusters, err := ReadFile(c.file)
	if err != nil {
		t.Error(err)
		return nil
	}
	objs, err := r.render(clusters[0], c.conf, useCache)
	if err != nil {
		t.Errorf("render(%s): %v", c.file, err)
		return nil
	}
	var b bytes.Buffer
	if err := WriteYAML(&b, objs); err != nil {
		t.Error(err)
	}
	return b.Bytes()
}
