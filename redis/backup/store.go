package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Store is where a backup's objects go and are read back from, by name
// (PREFIX/NAMESPACE/NAME/shard-N.rdb, …/manifest.json): a bucket of an S3-compatible
// store (Bucket), or a directory on a volume (Dir), which the operator reaches through a
// store pod that mounts it (Remote, served by StoreHandler). Every Store returns the same
// size and SHA-256 for the same bytes.
type Store interface {
	// Put writes r whole as the object key (no partial object is left on failure) and
	// returns its size and SHA-256; progress, if not nil, is told of the bytes as they go.
	Put(ctx context.Context, key string, r io.Reader, progress func(n int64)) (Uploaded, error)
	// PutSmall writes a small object in one go (the manifest).
	PutSmall(ctx context.Context, key string, body []byte) error
	// Get opens the object key; the caller closes it. A missing object is ErrObjectMissing
	// (or, from S3, an *S3Error with status 404).
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes the object key; a missing one is no error.
	Delete(ctx context.Context, key string) error
	// List returns the names of the objects that begin with prefix, by name.
	List(ctx context.Context, prefix string) ([]string, error)
}

// Uploaded is what Put wrote.
type Uploaded struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Errors of a Store.
var (
	// ErrChecksum: an object read whole does not have the checksum its backup recorded.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrObjectMissing: no object of that name in the store.
	ErrObjectMissing = errors.New("no such object")
	// ErrVolumeFull: the volume holding a Dir has no room left (ENOSPC, EDQUOT).
	ErrVolumeFull = errors.New("no space left on the volume")
)

// Bucket is one bucket of an S3 store as a Store.
type Bucket struct {
	S3   *S3
	Name string
}

// Put uploads r with a multipart upload (S3.Put).
func (b Bucket) Put(ctx context.Context, key string, r io.Reader, progress func(n int64)) (Uploaded, error) {
	return b.S3.Put(ctx, b.Name, key, r, progress)
}

// PutSmall uploads body in one request.
func (b Bucket) PutSmall(ctx context.Context, key string, body []byte) error {
	return b.S3.PutSmall(ctx, b.Name, key, body)
}

// Get opens the object.
func (b Bucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return b.S3.Get(ctx, b.Name, key)
}

// Delete removes the object.
func (b Bucket) Delete(ctx context.Context, key string) error { return b.S3.Delete(ctx, b.Name, key) }

// List lists the objects under prefix.
func (b Bucket) List(ctx context.Context, prefix string) ([]string, error) {
	return b.S3.List(ctx, b.Name, prefix)
}

// digest counts and hashes what is written to it: what every Store's Put returns.
type digest struct {
	h    hash.Hash
	size int64
}

func (d *digest) Write(p []byte) (int, error) {
	if d.h == nil {
		d.h = sha256.New()
	}
	d.size += int64(len(p))
	return d.h.Write(p)
}

func (d *digest) uploaded() Uploaded {
	if d.h == nil {
		d.h = sha256.New()
	}
	return Uploaded{Size: d.size, SHA256: hex.EncodeToString(d.h.Sum(nil))}
}

// VerifyingReader reads r and, at its end, fails unless what was read has the SHA-256
// want (hex): a restore never takes a changed object for the backup.
func VerifyingReader(r io.ReadCloser, want string) io.ReadCloser {
	return &verifying{r: r, want: want}
}

type verifying struct {
	r    io.ReadCloser
	d    digest
	want string
}

func (v *verifying) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.d.Write(p[:n])
	if err == io.EOF && v.want != "" {
		if got := v.d.uploaded().SHA256; got != v.want {
			return n, fmt.Errorf("%w: object checksum %s, the backup recorded %s", ErrChecksum, got, v.want)
		}
	}
	return n, err
}

func (v *verifying) Close() error { return v.r.Close() }
