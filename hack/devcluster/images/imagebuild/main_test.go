package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// readArchive returns the archive's files by name.
func readArchive(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = data
	}
}

// blob returns the blob a descriptor names, after checking its digest and size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	data, ok := files["blobs/sha256/"+d.Digest[len("sha256:"):]]
	if !ok {
		t.Fatalf("blob %s is missing", d.Digest)
	}
	if got := fmt.Sprintf("sha256:%x", sha256.Sum256(data)); got != d.Digest {
		t.Fatalf("blob %s has digest %s", d.Digest, got)
	}
	if int64(len(data)) != d.Size {
		t.Fatalf("blob %s: size %d, descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data
}

func TestBuild(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "data"), 0o700))
	must(os.WriteFile(filepath.Join(root, "usr/bin/tool"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr/bin/tool"), 0o755|os.ModeSetuid))
	must(os.Link(filepath.Join(root, "usr/bin/tool"), filepath.Join(root, "usr/bin/tool2")))
	must(os.Symlink("usr/bin", filepath.Join(root, "bin")))

	spec := Spec{
		Name:       "docker.io/library/test:1.0",
		Entrypoint: []string{"tool"},
		Cmd:        []string{"--flag"},
		User:       "999:999",
		Env:        []string{"A=b"},
		WorkingDir: "/data",
		Labels:     map[string]string{"variant": "a"},
		Chown:      map[string]Owner{"/data": {999, 998}},
	}
	var out bytes.Buffer
	must(Build(&out, root, spec))
	files := readArchive(t, out.Bytes())

	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	var idx index
	must(json.Unmarshal(files["index.json"], &idx))
	if len(idx.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.Annotations[AnnotationImageName] != spec.Name || md.Annotations[AnnotationRefName] != "1.0" {
		t.Errorf("annotations = %v", md.Annotations)
	}
	var mf manifest
	must(json.Unmarshal(blob(t, files, md), &mf))
	if mf.MediaType != mediaTypeManifest || len(mf.Layers) != 1 || mf.Layers[0].MediaType != mediaTypeLayer {
		t.Fatalf("manifest = %+v", mf)
	}
	var cfg imageConfig
	must(json.Unmarshal(blob(t, files, mf.Config), &cfg))
	if cfg.Config.User != "999:999" || cfg.Config.WorkingDir != "/data" || cfg.Config.Labels["variant"] != "a" ||
		fmt.Sprint(cfg.Config.Entrypoint, cfg.Config.Cmd) != "[tool] [--flag]" ||
		fmt.Sprint(cfg.Config.Env) != "["+defaultPath+" A=b]" {
		t.Errorf("config = %+v", cfg.Config)
	}

	// The layer: its gzip digest is the manifest's, its uncompressed digest the config's diff_id.
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, mf.Layers[0])))
	must(err)
	layerTar, err := io.ReadAll(zr)
	must(err)
	if got := fmt.Sprintf("sha256:%x", sha256.Sum256(layerTar)); len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != got {
		t.Errorf("diff_ids = %v, layer's digest is %s", cfg.RootFS.DiffIDs, got)
	}
	type entry struct {
		typ      byte
		mode     int64
		uid, gid int
		link     string
	}
	want := map[string]entry{
		"bin":           {tar.TypeSymlink, 0o777, 0, 0, "usr/bin"},
		"data/":         {tar.TypeDir, 0o700, 999, 998, ""},
		"usr/":          {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/bin/":      {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/bin/tool":  {tar.TypeReg, 0o4755, 0, 0, ""},
		"usr/bin/tool2": {tar.TypeLink, 0o4755, 0, 0, "usr/bin/tool"},
	}
	tr := tar.NewReader(bytes.NewReader(layerTar))
	got := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got[hdr.Name] = entry{hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Linkname}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("layer entries:\n got %v\nwant %v", got, want)
	}

	// Reproducible: the same input gives the same bytes; another label another image ID.
	var again bytes.Buffer
	must(Build(&again, root, spec))
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Error("two builds of the same input differ")
	}
	spec.Labels = map[string]string{"variant": "b"}
	var other bytes.Buffer
	must(Build(&other, root, spec))
	var idx2 index
	must(json.Unmarshal(readArchive(t, other.Bytes())["index.json"], &idx2))
	if idx2.Manifests[0].Digest == md.Digest {
		t.Error("a different label gave the same manifest")
	}
}

func TestBuildRejects(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"redis:7.0", "docker.io/library/redis", "docker.io/library/redis@sha256:00"} {
		if err := Build(io.Discard, root, Spec{Name: name}); err == nil {
			t.Errorf("name %q was accepted", name)
		}
	}
	if err := Build(io.Discard, root, Spec{Name: "docker.io/x/y:1", Chown: map[string]Owner{"/nope": {1, 1}}}); err == nil {
		t.Error("-chown of a missing path was accepted")
	}
}
