package redistest

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Image is one server the project ships an image for (docs/servers.md): Archive is its
// OCI archive under bin/images (hack/devcluster/images.sh), "" for the host's Redis 7.0.
type Image struct {
	Name    string // "redis 8.0", as the tests name it
	Archive string // "redis-8.0"
}

// Images are the servers of the project's images: the host's Redis 7.0 (what the redis
// image is made of) and the three newer ones.
var Images = []Image{
	{Name: "redis 7.0"},
	{Name: "redis 8.0", Archive: "redis-8.0"},
	{Name: "valkey 8.1", Archive: "valkey-8.1"},
	{Name: "valkey 9.1", Archive: "valkey-9.1"},
}

var unpacked sync.Map // archive name -> *unpackOnce

type unpackOnce struct {
	once sync.Once
	path string
	err  error
}

// ServerBinary is a redis-server of the image this host can run (Config.Binary): the
// host's for Redis 7.0; for the others the image's own, from its root filesystem
// unpacked under bin/images/rootfs (once, shared by later runs), started by the image's
// dynamic loader on the image's libraries, since they are built for newer Debian
// suites than the host's. A missing archive is built with hack/devcluster/images.sh.
func ServerBinary(t testing.TB, img Image) string {
	t.Helper()
	if img.Archive == "" {
		return RedisServer
	}
	v, _ := unpacked.LoadOrStore(img.Archive, &unpackOnce{})
	u := v.(*unpackOnce)
	u.once.Do(func() { u.path, u.err = imageServer(img.Archive) })
	if u.err != nil {
		t.Fatalf("%s: %v", img.Name, u.err)
	}
	return u.path
}

func imageServer(name string) (string, error) {
	root := repoRoot()
	archive := filepath.Join(root, "bin", "images", name+".tar")
	if _, err := os.Stat(archive); err != nil {
		cmd := exec.Command(filepath.Join(root, "hack", "devcluster", "images.sh"), name)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building %s: %w: %s", archive, err, out)
		}
	}
	// images.sh rebuilds under an exclusive lock of bin/images/.lock (its stamp removed,
	// then written again): the archive and its stamp are read under a shared one.
	unlock, err := lockImages(filepath.Join(root, "bin", "images", ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	stamp, err := imageStamp(root, name)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "images", "rootfs", name+"-"+stamp[:12])
	wrapper := filepath.Join(dir, "redis-server")
	if _, err := os.Stat(wrapper); err == nil {
		return wrapper, nil
	}
	// Unpacked beside, then renamed: another test process unpacking the same image at
	// the same time leaves one whole copy.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), name+".tmp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	fs := filepath.Join(tmp, "fs")
	if err := unpackOCI(archive, fs); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", archive, err)
	}
	if err := writeWrapper(tmp, fs, filepath.Join(dir, "fs"), archive); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(wrapper); serr == nil {
			return wrapper, nil
		}
		return "", err
	}
	return wrapper, nil
}

// writeWrapper writes tmp/redis-server, a script that runs the unpacked image's server
// (under fs now, under final once renamed) with its own loader and libraries.
func writeWrapper(tmp, fs, final, archive string) error {
	loaders, _ := filepath.Glob(filepath.Join(fs, "usr", "lib", "*", "ld-linux*.so.*"))
	if len(loaders) == 0 {
		return fmt.Errorf("%s has no dynamic loader under usr/lib", archive)
	}
	target, err := os.Readlink(filepath.Join(fs, "usr", "bin", "redis-server"))
	if err != nil {
		target = "redis-server"
	}
	libs := filepath.Dir(strings.Replace(loaders[0], fs, final, 1))
	// --argv0: the binary picks its mode by its name (redis-server is a link to
	// redis-check-rdb in Debian's Redis 8 package).
	script := fmt.Sprintf("#!/bin/sh\nexec %s --argv0 redis-server --library-path %s:%s %s \"$@\"\n",
		strings.Replace(loaders[0], fs, final, 1), libs, filepath.Join(final, "lib", filepath.Base(libs)),
		filepath.Join(final, "usr", "bin", target))
	return os.WriteFile(filepath.Join(tmp, "redis-server"), []byte(script), 0o755)
}

// unpackOCI writes the layers of the single image of an OCI archive to dir: regular
// files, directories, symbolic and hard links (no device files, no whiteouts, which
// images.sh's images do not have).
func unpackOCI(archive, dir string) error {
	blobs := map[string][]byte{}
	var layers []string
	read := func(want func(name string) bool, each func(name string, r io.Reader) error) error {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		defer f.Close()
		return eachEntry(tar.NewReader(f), func(h *tar.Header, r io.Reader) error {
			if want(h.Name) {
				return each(h.Name, r)
			}
			return nil
		})
	}
	// index.json and manifests are small: read every JSON-looking blob.
	if err := read(func(string) bool { return true }, func(name string, r io.Reader) error {
		br := bufio.NewReader(r)
		if b, _ := br.Peek(1); len(b) == 1 && b[0] == '{' {
			raw, err := io.ReadAll(br)
			blobs[strings.TrimPrefix(name, "blobs/sha256/")] = raw
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	type desc struct {
		Digest string `json:"digest"`
	}
	var doc struct {
		Manifests []desc `json:"manifests"`
		Layers    []desc `json:"layers"`
	}
	if err := json.Unmarshal(blobs["index.json"], &doc); err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	for len(doc.Layers) == 0 && len(doc.Manifests) > 0 {
		raw := blobs[strings.TrimPrefix(doc.Manifests[0].Digest, "sha256:")]
		doc.Manifests = nil
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
	}
	for _, l := range doc.Layers {
		layers = append(layers, "blobs/sha256/"+strings.TrimPrefix(l.Digest, "sha256:"))
	}
	if len(layers) == 0 {
		return fmt.Errorf("no layers")
	}
	for _, layer := range layers {
		if err := read(func(name string) bool { return name == layer }, func(_ string, r io.Reader) error {
			return untar(r, dir)
		}); err != nil {
			return err
		}
	}
	return nil
}

func untar(r io.Reader, dir string) error {
	br := bufio.NewReader(r)
	if b, _ := br.Peek(2); len(b) == 2 && b[0] == 0x1f && b[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	} else {
		r = br
	}
	return eachEntry(tar.NewReader(r), func(h *tar.Header, tr io.Reader) error {
		var err error
		name := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				var f *os.File
				if f, err = os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600); err == nil {
					_, err = io.Copy(f, tr)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
			}
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				_ = os.Remove(name)
				err = os.Symlink(h.Linkname, name)
			}
		case tar.TypeLink:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				_ = os.Remove(name)
				err = os.Link(filepath.Join(dir, filepath.Clean("/"+h.Linkname)), name)
			}
		}
		return err
	})
}

// eachEntry calls fn for every entry of a tar stream, with the entry's content.
func eachEntry(tr *tar.Reader, fn func(*tar.Header, io.Reader) error) error {
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}

// imageStamp is the stamp images.sh wrote for image name (a SHA-256 of its inputs).
func imageStamp(root, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "bin", "images", "."+name+".stamp"))
	if err != nil {
		return "", err
	}
	stamp := strings.TrimSpace(string(b))
	if len(stamp) < 12 {
		return "", fmt.Errorf("%s: a stamp of %q", name, b)
	}
	return stamp, nil
}

// lockImages takes a shared lock of path, the lock images.sh builds under.
func lockImages(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
