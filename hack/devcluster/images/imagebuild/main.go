// Command imagebuild turns a root filesystem directory and an image config into an OCI image
// archive (oci-layout, index.json, blobs/sha256/...) that `ctr -n k8s.io images import FILE`
// registers under its full name. It stands in for `docker build` on machines with no Docker
// engine and no registry.
//
// The image has one gzip layer holding the whole directory. Every entry is owned by root
// (0:0) unless a -chown names it, keeps its permission bits (setuid/setgid/sticky included) and
// gets the modification time 0, so the same directory and flags give the same archive byte for
// byte, and so the same image ID.
//
//	imagebuild -rootfs DIR -name docker.io/library/redis:7.0 -o redis.tar \
//	  -entrypoint '["redis-server"]' -user 999:999 -workdir /data \
//	  -env K=V -label k=v -chown /data=999:999
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Media types and annotations, as in github.com/opencontainers/image-spec and containerd.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationImageName is the full name containerd's importer registers the image under.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the OCI reference name: the tag alone, as containerd's exporter writes it.
	AnnotationRefName = "org.opencontainers.image.ref.name"

	defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Spec is what goes into an image besides its files.
type Spec struct {
	Name       string            // full reference, e.g. docker.io/library/redis:7.0
	Entrypoint []string          // may be empty
	Cmd        []string          // may be empty
	User       string            // e.g. "999:999"; empty means root
	Env        []string          // K=V; a default PATH is added when none is given
	WorkingDir string            // empty means /
	Labels     map[string]string // may be empty
	Chown      map[string]Owner  // image path ("/data") -> owner; every other entry is root's
}

// Owner is a numeric uid and gid.
type Owner struct{ UID, GID int }

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User,omitempty"`
		Env        []string          `json:"Env,omitempty"`
		Entrypoint []string          `json:"Entrypoint,omitempty"`
		Cmd        []string          `json:"Cmd,omitempty"`
		WorkingDir string            `json:"WorkingDir,omitempty"`
		Labels     map[string]string `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		CreatedBy string `json:"created_by"`
	} `json:"history"`
}

// Build writes the OCI image archive of rootfs and spec to w.
func Build(w io.Writer, rootfs string, spec Spec) error {
	tag, err := tagOf(spec.Name)
	if err != nil {
		return err
	}
	var layerTar bytes.Buffer
	if err := writeLayer(&layerTar, rootfs, spec.Chown); err != nil {
		return err
	}
	var layer bytes.Buffer
	zw, err := gzip.NewWriterLevel(&layer, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(layerTar.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	var cfg imageConfig
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Config.User = spec.User
	cfg.Config.Env = withPath(spec.Env)
	cfg.Config.Entrypoint, cfg.Config.Cmd = spec.Entrypoint, spec.Cmd
	cfg.Config.WorkingDir = spec.WorkingDir
	cfg.Config.Labels = spec.Labels
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{digestOf(layerTar.Bytes())}
	cfg.History = []struct {
		CreatedBy string `json:"created_by"`
	}{{CreatedBy: "hack/devcluster/images/imagebuild"}}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}

	mf := manifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        descriptor{MediaType: mediaTypeConfig, Digest: digestOf(cfgJSON), Size: int64(len(cfgJSON))},
		Layers:        []descriptor{{MediaType: mediaTypeLayer, Digest: digestOf(layer.Bytes()), Size: int64(layer.Len())}},
	}
	mfJSON, err := json.Marshal(mf)
	if err != nil {
		return err
	}
	idx := index{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []descriptor{{
		MediaType:   mediaTypeManifest,
		Digest:      digestOf(mfJSON),
		Size:        int64(len(mfJSON)),
		Platform:    &platform{Architecture: runtime.GOARCH, OS: "linux"},
		Annotations: map[string]string{AnnotationImageName: spec.Name, AnnotationRefName: tag},
	}}}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idxJSON},
		{blobPath(layer.Bytes()), layer.Bytes()},
		{blobPath(cfgJSON), cfgJSON},
		{blobPath(mfJSON), mfJSON},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, f := range files {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeLayer writes rootfs as an uncompressed layer tar, in lexical order, hard links kept.
func writeLayer(w io.Writer, rootfs string, chown map[string]Owner) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	used := map[string]bool{}
	err := filepath.WalkDir(rootfs, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(rootfs, path)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), ModTime: time.Unix(0, 0)}
		if info.Mode()&fs.ModeSetuid != 0 {
			hdr.Mode |= 0o4000
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			hdr.Mode |= 0o2000
		}
		if info.Mode()&fs.ModeSticky != 0 {
			hdr.Mode |= 0o1000
		}
		if o, ok := chown["/"+name]; ok {
			hdr.Uid, hdr.Gid = o.UID, o.GID
			used["/"+name] = true
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		case mode&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(path); err != nil {
				return err
			}
		case mode.IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := inode{uint64(st.Dev), st.Ino}
				if first, ok := seen[key]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					seen[key] = name
				}
			}
		default:
			return fmt.Errorf("%s: unsupported file type %s", path, mode.Type())
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for p := range chown {
		if !used[p] {
			return fmt.Errorf("-chown %s: no such path in the root filesystem", p)
		}
	}
	return tw.Close()
}

// tagOf returns the tag of a full reference ("docker.io/library/redis:7.0" -> "7.0").
func tagOf(name string) (string, error) {
	slash := strings.LastIndex(name, "/")
	colon := strings.LastIndex(name, ":")
	if slash < 0 || colon < slash || strings.Contains(name, "@") {
		return "", fmt.Errorf("image name %q: want a full name with a tag, such as docker.io/library/redis:7.0", name)
	}
	return name[colon+1:], nil
}

func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append([]string{defaultPath}, env...)
}

func digestOf(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

func blobPath(b []byte) string { return fmt.Sprintf("blobs/sha256/%x", sha256.Sum256(b)) }

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func jsonList(flagName, v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return nil, fmt.Errorf("-%s: want a JSON list of strings: %w", flagName, err)
	}
	return l, nil
}

func parseOwner(v string) (Owner, error) {
	uid, gid, ok := strings.Cut(v, ":")
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if !ok || err1 != nil || err2 != nil {
		return Owner{}, fmt.Errorf("owner %q: want UID:GID", v)
	}
	return Owner{u, g}, nil
}

func run() error {
	var (
		rootfs     = flag.String("rootfs", "", "root filesystem directory (required)")
		out        = flag.String("o", "", "archive to write (required)")
		name       = flag.String("name", "", "full image name with tag, e.g. docker.io/library/redis:7.0 (required)")
		entrypoint = flag.String("entrypoint", "", `entrypoint as a JSON list, e.g. '["/manager"]'`)
		cmd        = flag.String("cmd", "", "command (arguments to the entrypoint) as a JSON list")
		user       = flag.String("user", "", "user the process runs as, e.g. 999:999")
		workdir    = flag.String("workdir", "", "working directory")
		env        listFlag
		labels     listFlag
		chowns     listFlag
	)
	flag.Var(&env, "env", "K=V in the environment (repeatable)")
	flag.Var(&labels, "label", "k=v image label (repeatable)")
	flag.Var(&chowns, "chown", "PATH=UID:GID owner of one path in the image, e.g. /data=999:999 (repeatable)")
	flag.Parse()
	if *rootfs == "" || *out == "" || *name == "" || flag.NArg() > 0 {
		flag.Usage()
		return errors.New("-rootfs, -o and -name are required")
	}
	spec := Spec{Name: *name, User: *user, WorkingDir: *workdir, Env: env, Labels: map[string]string{}, Chown: map[string]Owner{}}
	var err error
	if spec.Entrypoint, err = jsonList("entrypoint", *entrypoint); err != nil {
		return err
	}
	if spec.Cmd, err = jsonList("cmd", *cmd); err != nil {
		return err
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("-label %q: want k=v", l)
		}
		spec.Labels[k] = v
	}
	for _, c := range chowns {
		p, o, ok := strings.Cut(c, "=")
		if !ok || !strings.HasPrefix(p, "/") {
			return fmt.Errorf("-chown %q: want /PATH=UID:GID", c)
		}
		if spec.Chown[filepath.Clean(p)], err = parseOwner(o); err != nil {
			return err
		}
	}

	tmp, err := os.CreateTemp(filepath.Dir(*out), ".imagebuild-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := Build(tmp, *rootfs, spec); err != nil {
		tmp.Close()
		return err
	}
	// CreateTemp makes it 0600; an image archive is no secret.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), *out)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}
