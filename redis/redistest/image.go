package redistest

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ImageServer is the server binary of one of the project's server images (bin/images/NAME.tar,
// built by `make images`, e.g. "valkey-9.1"), run on the host with the image's own
// libraries (ImageBinary), unpacked into the test's temporary directory. A missing image
// fails the test: the images are built before the tests.
func ImageServer(t testing.TB, image, binary string) string {
	t.Helper()
	p, err := ImageBinary(t.TempDir(), image, binary)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ImageBinary unpacks the image bin/images/IMAGE.tar into dir and returns the path of a
// script that runs the image's binary with the image's own loader and libraries, by exec
// (so the PID is the binary's). A dir the image was unpacked into already is used as it is.
func ImageBinary(dir, image, binary string) (string, error) {
	tarPath := filepath.Join(repoRoot(), "bin", "images", image+".tar")
	if _, err := os.Stat(filepath.Join(dir, "usr", "bin", binary)); err != nil {
		if err := unpackImage(tarPath, dir); err != nil {
			return "", fmt.Errorf("failed to unpack %s (make images): %w", tarPath, err)
		}
	}
	lib := filepath.Join(dir, "usr", "lib", "x86_64-linux-gnu")
	script := fmt.Sprintf("#!/bin/sh\nexec %q --library-path %q %q \"$@\"\n",
		filepath.Join(lib, "ld-linux-x86-64.so.2"), lib, filepath.Join(dir, "usr", "bin", binary))
	p := filepath.Join(dir, binary+".sh")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		return "", err
	}
	return p, nil
}

// unpackImage extracts the layers of the OCI archive at tarPath (one platform) into dir.
func unpackImage(tarPath, dir string) error {
	blobs := map[string][]byte{}
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var layerNames []string
	tr := tar.NewReader(f)
	var index []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch {
		case h.Name == "index.json":
			index, err = io.ReadAll(tr)
		case strings.HasPrefix(h.Name, "blobs/sha256/") && h.Typeflag == tar.TypeReg:
			blobs["sha256:"+strings.TrimPrefix(h.Name, "blobs/sha256/")], err = io.ReadAll(tr)
		}
		if err != nil {
			return err
		}
	}
	var idx struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) == 0 {
		return fmt.Errorf("no manifest in index.json: %v", err)
	}
	var man struct {
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(blobs[idx.Manifests[0].Digest], &man); err != nil {
		return err
	}
	for _, l := range man.Layers {
		layerNames = append(layerNames, l.Digest)
	}
	if len(layerNames) == 0 {
		return errors.New("the image has no layer")
	}
	for _, name := range layerNames {
		if err := extractLayer(blobs[name], dir); err != nil {
			return err
		}
	}
	return nil
}

func extractLayer(blob []byte, dir string) error {
	gz, err := gzip.NewReader(strings.NewReader(string(blob)))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				var out *os.File
				if out, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600); err == nil {
					_, err = io.Copy(out, tr)
					out.Close()
				}
			}
		case tar.TypeSymlink:
			_ = os.MkdirAll(filepath.Dir(target), 0o755)
			err = os.Symlink(h.Linkname, target)
		}
		if err != nil {
			return err
		}
	}
}
