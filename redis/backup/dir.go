package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Dir is a directory as a Store, the store of a PersistentVolumeClaim destination: the
// object a/b/shard-0.rdb is the file ROOT/a/b/shard-0.rdb, the same names as in a bucket.
// Put writes ROOT/a/b/.shard-0.rdb.partial, syncs it and renames it: a file under an
// object's name is always whole. List never shows the .partial files.
type Dir struct {
	Root string
}

const partialSuffix = ".partial"

// file is the path of the object key, refused if key is not a clean relative name (no
// "..", no leading or trailing slash, no empty element).
func (d Dir) file(key string) (string, error) {
	if key == "" || path.Clean("/"+key) != "/"+key || strings.HasSuffix(path.Base(key), partialSuffix) {
		return "", fmt.Errorf("bad object name %q", key)
	}
	return filepath.Join(d.Root, filepath.FromSlash(key)), nil
}

// full maps the volume's "no room" errors to ErrVolumeFull.
func full(err error, key string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: writing %s: %v", ErrVolumeFull, key, err)
	}
	return fmt.Errorf("writing %s: %w", key, err)
}

// Put writes r to the object key (through a .partial file, synced, then renamed).
func (d Dir) Put(ctx context.Context, key string, r io.Reader, progress func(n int64)) (Uploaded, error) {
	name, err := d.file(key)
	if err != nil {
		return Uploaded{}, err
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		return Uploaded{}, full(err, key)
	}
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+partialSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return Uploaded{}, full(err, key)
	}
	var sum digest
	_, err = io.Copy(io.MultiWriter(f, &sum), &counting{ctx: ctx, r: r, progress: progress})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return Uploaded{}, full(err, key)
	}
	syncDir(filepath.Dir(name))
	return sum.uploaded(), nil
}

// syncDir makes a rename in dir durable (best effort: not every filesystem syncs a directory).
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		f.Close()
	}
}

// counting reads r, telling progress of each read, and stops once ctx is done.
type counting struct {
	ctx      context.Context
	r        io.Reader
	progress func(n int64)
}

func (c *counting) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if n > 0 && c.progress != nil {
		c.progress(int64(n))
	}
	return n, err
}

// PutSmall writes body as the object key.
func (d Dir) PutSmall(ctx context.Context, key string, body []byte) error {
	_, err := d.Put(ctx, key, strings.NewReader(string(body)), nil)
	return err
}

// Get opens the object key.
func (d Dir) Get(_ context.Context, key string) (io.ReadCloser, error) {
	name, err := d.file(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrObjectMissing, key)
	}
	return f, err
}

// Delete removes the object key, then its directories that are left empty.
func (d Dir) Delete(_ context.Context, key string) error {
	name, err := d.file(key)
	if err != nil {
		return err
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	root := filepath.Clean(d.Root)
	for dir := filepath.Dir(name); dir != root && strings.HasPrefix(dir, root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty (or gone): the ones above are not empty either
			break
		}
	}
	return nil
}

// List returns the objects whose names begin with prefix, by name.
func (d Dir) List(_ context.Context, prefix string) ([]string, error) {
	start := d.Root
	if dir := path.Dir(prefix + "x"); dir != "." { // the deepest directory prefix names whole
		start = filepath.Join(d.Root, filepath.FromSlash(dir))
	}
	var names []string
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == start {
			return fs.SkipAll // nothing under that prefix
		}
		if err != nil || e.IsDir() || strings.HasSuffix(e.Name(), partialSuffix) {
			return err
		}
		rel, err := filepath.Rel(d.Root, p)
		if key := filepath.ToSlash(rel); err == nil && strings.HasPrefix(key, prefix) {
			names = append(names, key)
		}
		return err
	})
	sort.Strings(names)
	return names, err
}
