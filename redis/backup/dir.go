package backup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
)

// Dir is a directory as a Store, the store of a PersistentVolumeClaim destination: the
// object a/b/shard-0.rdb is the file ROOT/a/b/shard-0.rdb, the same names as in a bucket.
// Put writes ROOT/a/b/.shard-0.rdb.RANDOM.partial, syncs it and renames it: a file under
// an object's name is always whole, and two uploads of one key at once never share a
// file. List never shows the .partial files, nor anything but regular files.
//
// Every operation goes through an os.Root of ROOT: the volume is written by whoever mounts
// it, so a symbolic link on it (to /etc, or ../../) must not take a read, a write, a delete
// or a listing outside ROOT. os.Root refuses any name that would leave the directory, by
// ".." or by a link, at each component, without a race between the check and the use.
type Dir struct {
	Root string
}

const partialSuffix = ".partial"

// validName is a clean relative slash-separated name: no "..", ".", empty element,
// leading or trailing slash.
func validName(name string) bool { return name != "." && fs.ValidPath(name) }

// errBadName: an object name or prefix that is not a clean relative name (a store pod
// answers 400).
var errBadName = errors.New("bad object name")

// checkKey refuses a key that is not a validName, or names an upload's temporary file.
func checkKey(key string) error {
	if !validName(key) || strings.HasSuffix(path.Base(key), partialSuffix) {
		return fmt.Errorf("%w %q", errBadName, key)
	}
	return nil
}

// checkPrefix refuses a prefix that is not "" or a validName, with a trailing slash allowed
// (prefix/ns/nightly/ lists that directory, prefix/ns/nightly every name that begins so).
func checkPrefix(prefix string) error {
	if p := strings.TrimSuffix(prefix, "/"); prefix != "" && !validName(p) {
		return fmt.Errorf("%w: prefix %q", errBadName, prefix)
	}
	return nil
}

// open is the os.Root of the directory, for one operation: the caller closes it.
func (d Dir) open() (*os.Root, error) {
	return os.OpenRoot(d.Root)
}

// full maps the volume's "no room" errors to ErrVolumeFull.
func full(err error, key string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: writing %s: %v", ErrVolumeFull, key, err)
	}
	return fmt.Errorf("writing %s: %w", key, err)
}

// partialName is a new temporary name beside key: .BASE.RANDOM.partial, hidden from List
// and refused as a key, its own to each upload.
func partialName(key string) string {
	raw := make([]byte, 8)
	_, _ = rand.Read(raw)
	return path.Join(path.Dir(key), "."+path.Base(key)+"."+hex.EncodeToString(raw)+partialSuffix)
}

// Put writes r to the object key (through a .partial file of its own, synced, then
// renamed); the .partial file is removed on failure.
func (d Dir) Put(ctx context.Context, key string, r io.Reader, progress func(n int64)) (Uploaded, error) {
	if err := checkKey(key); err != nil {
		return Uploaded{}, err
	}
	root, err := d.open()
	if err != nil {
		return Uploaded{}, err
	}
	defer root.Close()
	if err := root.MkdirAll(path.Dir(key), 0o750); err != nil {
		return Uploaded{}, full(err, key)
	}
	tmp := partialName(key)
	// O_EXCL: the name is new; were it there (a link), the open fails rather than follow it.
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
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
		err = root.Rename(tmp, key)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return Uploaded{}, full(err, key)
	}
	syncDir(root, path.Dir(key))
	return sum.uploaded(), nil
}

// syncDir makes a rename in dir durable (best effort: not every filesystem syncs a directory).
func syncDir(root *os.Root, dir string) {
	if f, err := root.Open(dir); err == nil {
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

// Get opens the object key, a regular file (a directory, a FIFO or a device under that
// name is no object: opened without blocking, then refused).
func (d Dir) Get(_ context.Context, key string) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	defer root.Close() // an open file outlives its Root
	f, err := root.OpenFile(key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrObjectMissing, key)
	} else if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file (%v)", ErrObjectMissing, key, err)
	}
	return f, nil
}

// Delete removes the object key, then its directories that are left empty.
func (d Dir) Delete(_ context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	root, err := d.open()
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if root.Remove(dir) != nil { // not empty (or gone): the ones above are not empty either
			break
		}
	}
	return nil
}

// List returns the objects whose names begin with prefix, by name: the regular files
// under ROOT but the .partial ones. A link is never followed.
func (d Dir) List(_ context.Context, prefix string) ([]string, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	start := path.Dir(prefix + "x") // the deepest directory prefix names whole, "." for ROOT
	var names []string
	err = fs.WalkDir(root.FS(), start, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // nothing under that prefix, or a directory deleted meanwhile
		}
		if err != nil || !e.Type().IsRegular() || strings.HasSuffix(e.Name(), partialSuffix) {
			return err
		}
		if strings.HasPrefix(p, prefix) {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}
