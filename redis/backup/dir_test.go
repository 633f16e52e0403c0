package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// files lists every entry under root (relative, slash-separated), links included, not
// following them.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && p != root && !e.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDirKeepsEveryOperationInsideItsRoot: links placed on the volume, to a directory
// and to a file outside it, by absolute and by relative target, take no Put, Get, Delete
// or List outside the directory; the files outside stay as they were.
func TestDirKeepsEveryOperationInsideItsRoot(t *testing.T) {
	ctx := context.Background()
	outside, root := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.rdb")
	if err := os.WriteFile(secret, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, outside)
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"abs": outside, "rel": rel, "file.rdb": secret, "relfile.rdb": filepath.Join(rel, "secret.rdb")} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	d := Dir{Root: root}
	for _, key := range []string{"abs/secret.rdb", "rel/secret.rdb", "file.rdb", "relfile.rdb"} {
		if rc, err := d.Get(ctx, key); err == nil {
			got, _ := io.ReadAll(rc)
			rc.Close()
			t.Errorf("Get %s read %q from outside the directory", key, got)
		}
	}
	for _, key := range []string{"abs/new.rdb", "rel/new.rdb", "abs/sub/new.rdb"} {
		if _, err := d.Put(ctx, key, strings.NewReader("written"), nil); err == nil {
			t.Errorf("Put %s succeeded through a link out of the directory", key)
		}
	}
	for _, key := range []string{"abs/secret.rdb", "rel/secret.rdb"} {
		if err := d.Delete(ctx, key); err == nil {
			t.Errorf("Delete %s succeeded through a link out of the directory", key)
		}
	}
	for _, prefix := range []string{"", "abs/", "rel/", "abs/secret"} {
		if names, _ := d.List(ctx, prefix); len(names) != 0 {
			t.Errorf("List %q shows %q: links are not objects, nor what is behind them", prefix, names)
		}
	}
	if got, err := os.ReadFile(secret); err != nil || string(got) != "not yours" {
		t.Fatalf("the file outside is %q, %v", got, err)
	}
	if got := files(t, outside); !slices.Equal(got, []string{"secret.rdb"}) {
		t.Fatalf("outside the directory now: %q", got)
	}
	// A Put over a link replaces the link, not what it points to.
	if _, err := d.Put(ctx, "file.rdb", strings.NewReader("mine"), nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(secret); string(got) != "not yours" {
		t.Fatalf("a Put over a link wrote outside: %q", got)
	}
}

// TestDirRefusesBadNamesAndPrefixes: a key or a List prefix that is not a clean relative
// name is refused (as a 400 through the store pod), and the temporary files' names are no
// keys.
func TestDirRefusesBadNamesAndPrefixes(t *testing.T) {
	ctx := context.Background()
	remote, root := remoteDir(t)
	d := Dir{Root: root}
	if err := d.PutSmall(ctx, "p/ns/b/manifest.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"..", "../", "../p", "/p", "/", "p/../..", "p//ns", "./p", "p/./ns", ".", "p/ns/.."} {
		for name, st := range map[string]Store{"dir": d, "store pod": remote} {
			names, err := st.List(ctx, prefix)
			var se *StoreError
			if !errors.Is(err, errBadName) && !(errors.As(err, &se) && se.Status == 400) {
				t.Errorf("%s: List %q: %q, %v; want a refusal", name, prefix, names, err)
			}
		}
	}
	for _, prefix := range []string{"", "p", "p/", "p/ns/b/", "p/ns/b/man"} {
		if names, err := d.List(ctx, prefix); err != nil || !slices.Equal(names, []string{"p/ns/b/manifest.json"}) {
			t.Errorf("List %q: %q, %v", prefix, names, err)
		}
	}
	for _, key := range []string{"", "/p/x", "p/../x", "../x", "p/x/", "p//x", "p/.x.partial", "p/.x.0123abcd.partial"} {
		if _, err := d.Put(ctx, key, strings.NewReader("x"), nil); !errors.Is(err, errBadName) {
			t.Errorf("Put %q: %v; want a refusal", key, err)
		}
	}
}

// lockstep hands out chunks of one byte value, taking turns with another lockstep: it
// waits for its turn before each chunk and passes the turn on when asked for the next,
// so the writer behind it has written the previous one by then.
type lockstep struct {
	fill          byte
	chunks        int
	mine, theirs  chan struct{}
	holding, done bool
}

func (l *lockstep) Read(p []byte) (int, error) {
	if l.holding {
		l.holding = false
		l.theirs <- struct{}{}
	}
	if l.chunks == 0 {
		return 0, io.EOF
	}
	<-l.mine
	l.holding, l.chunks = true, l.chunks-1
	n := min(len(p), 4096)
	for i := range p[:n] {
		p[i] = l.fill
	}
	return n, nil
}

// TestTwoUploadsOfOneKeyAtOnce: two Puts of one key whose writes interleave (one chunk
// each in turn, the shorter finishing first) both succeed, each through a file of its own,
// and leave one whole object (either's bytes, not a mix) and no temporary file.
func TestTwoUploadsOfOneKeyAtOnce(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d := Dir{Root: root}
	aTurn, bTurn := make(chan struct{}, 1), make(chan struct{}, 1)
	aTurn <- struct{}{}
	readers := []*lockstep{{fill: 'a', chunks: 3, mine: aTurn, theirs: bTurn}, {fill: 'b', chunks: 2, mine: bTurn, theirs: aTurn}}
	ups, errs := make([]Uploaded, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Go(func() { ups[i], errs[i] = d.Put(ctx, "p/shard-0.rdb", r, nil) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent uploads of one key: %v, %v", errs[0], errs[1])
	}
	got, err := os.ReadFile(filepath.Join(root, "p/shard-0.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	whole := map[string]bool{strings.Repeat("a", 3*4096): true, strings.Repeat("b", 2*4096): true}
	if !whole[string(got)] {
		t.Fatalf("the object is a mix of both uploads: %d bytes, %d of them 'a'", len(got), bytes.Count(got, []byte("a")))
	}
	if left := files(t, root); !slices.Equal(left, []string{"p/shard-0.rdb"}) {
		t.Fatalf("left on the volume: %q", left)
	}
}

// failing gives some bytes, then an error.
type failing struct{ sent bool }

func (f *failing) Read(p []byte) (int, error) {
	if !f.sent {
		f.sent = true
		return copy(p, "half an rdb"), nil
	}
	return 0, errors.New("the connection broke")
}

// TestAFailedUploadLeavesNothing: a Put whose stream breaks leaves neither the object nor
// its temporary file.
func TestAFailedUploadLeavesNothing(t *testing.T) {
	root := t.TempDir()
	d := Dir{Root: root}
	if _, err := d.Put(context.Background(), "p/shard-0.rdb", &failing{}, nil); err == nil {
		t.Fatal("a broken stream was written")
	}
	if left := files(t, root); len(left) != 0 {
		t.Fatalf("a failed upload left %q", left)
	}
}
