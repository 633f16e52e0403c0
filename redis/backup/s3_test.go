package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/redis/redistest"
)

// TestS3AgainstARealServer puts an object of several parts to versitygw, reads it back
// whole with its checksum verified, and gets the store's own refusals for a missing
// bucket and for wrong credentials (versitygw checks the signature).
func TestS3AgainstARealServer(t *testing.T) {
	srv := redistest.StartS3(t, "127.0.0.1")
	ctx := context.Background()
	s3 := &S3{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PartSize: 5 << 20}
	if err := s3.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	if err := s3.HeadBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 12<<20+123)
	rand.Read(data)
	var progressed int64
	up, err := s3.Put(ctx, "backups", "prefix/a b/shard-0.rdb", bytes.NewReader(data), func(n int64) { progressed += n })
	if err != nil {
		t.Fatal(err)
	}
	if up.Size != int64(len(data)) || progressed != up.Size {
		t.Fatalf("uploaded %d bytes (progress %d), want %d", up.Size, progressed, len(data))
	}
	rc, err := s3.Get(ctx, "backups", "prefix/a b/shard-0.rdb")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(VerifyingReader(rc, up.SHA256))
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
	rc, _ = s3.Get(ctx, "backups", "prefix/a b/shard-0.rdb")
	if _, err := io.ReadAll(VerifyingReader(rc, "00")); err == nil {
		t.Fatal("a wrong checksum was not noticed")
	}
	rc.Close()
	var e *S3Error
	if err := s3.HeadBucket(ctx, "nope"); !errors.As(err, &e) || e.Status != 404 {
		t.Fatalf("missing bucket: %v", err)
	}
	bad := &S3{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: "wrong"}
	if err := bad.HeadBucket(ctx, "backups"); !errors.As(err, &e) || e.Status != 403 {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := s3.PutSmall(ctx, "backups", "prefix/other/manifest.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if names, err := s3.List(ctx, "backups", "prefix/a b/"); err != nil || !slices.Equal(names, []string{"prefix/a b/shard-0.rdb"}) {
		t.Fatalf("list of prefix/a b/: %q, %v", names, err)
	}
	if names, err := s3.List(ctx, "backups", "prefix/"); err != nil || len(names) != 2 {
		t.Fatalf("list of prefix/: %q, %v", names, err)
	}
	if err := s3.Delete(ctx, "backups", "prefix/a b/shard-0.rdb"); err != nil {
		t.Fatal(err)
	}
	if _, err := s3.Get(ctx, "backups", "prefix/a b/shard-0.rdb"); !errors.As(err, &e) || e.Status != 404 {
		t.Fatalf("deleted object: %v", err)
	}
}
