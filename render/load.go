package render

import (
	"fmt"
	"io/fs"
	"path"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
)

// overlayRoot is where the embedded module appears to the CUE loader. It need not
// exist: every file the loader reads comes from the overlay.
const overlayRoot = "/redis-cluster-operator/templates"

// compile loads the embedded CUE package and evaluates it once. The result is the
// template with an open `input`, filled per render.
func compile(ctx *cue.Context, fsys fs.FS) (cue.Value, error) {
	overlay := map[string]load.Source{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		overlay[path.Join(overlayRoot, p)] = load.FromBytes(data)
		return nil
	})
	if err != nil {
		return cue.Value{}, fmt.Errorf("failed to read embedded templates: %w", err)
	}
	insts := load.Instances([]string{"."}, &load.Config{
		Dir:        overlayRoot,
		ModuleRoot: overlayRoot,
		Overlay:    overlay,
	})
	if len(insts) != 1 {
		return cue.Value{}, fmt.Errorf("failed to load templates: %d instances, want 1", len(insts))
	}
	if err := insts[0].Err; err != nil {
		return cue.Value{}, fmt.Errorf("failed to load templates: %w", err)
	}
	v := ctx.BuildInstance(insts[0])
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("failed to build templates: %w", err)
	}
	return v, nil
}

// newContext is split out so tests and the benchmark share the one way to make it.
func newContext() *cue.Context { return cuecontext.New() }
