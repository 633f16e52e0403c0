package backup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// volumeFullEnv, set, is the directory the child of TestStorePodSaysTheVolumeIsFull
// mounts a tiny tmpfs on.
const volumeFullEnv = "BACKUP_TEST_TINY_VOLUME"

// TestStorePodSaysTheVolumeIsFull: a write the volume has no room for (the kernel's ENOSPC
// from a 64 KiB tmpfs, mounted in a mount namespace of the test's own) comes back through
// the store pod as ErrVolumeFull, leaving neither the object nor its temporary file. The
// test runs itself again in a new mount namespace (and a user namespace, when not root)
// to mount the tmpfs, which goes with the namespace.
func TestStorePodSaysTheVolumeIsFull(t *testing.T) {
	if dir := os.Getenv(volumeFullEnv); dir != "" {
		volumeFull(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := execSelf(t, "^TestStorePodSaysTheVolumeIsFull$", volumeFullEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "volume full as expected") {
		t.Fatalf("the test in its own mount namespace: %v\n%s", err, out)
	}
}

// volumeFull is TestStorePodSaysTheVolumeIsFull in its namespaces.
func volumeFull(t *testing.T, dir string) {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making the mounts private: %v", err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v", dir, err)
	}
	remote := serveDir(t, dir)
	ctx := context.Background()
	if _, err := remote.Put(ctx, "p/shard-0.rdb", bytes.NewReader(make([]byte, 1<<20)), nil); !errors.Is(err, ErrVolumeFull) {
		t.Fatalf("a full volume: %v", err)
	}
	if left := files(t, dir); len(left) != 0 {
		t.Fatalf("a failed write left %q", left)
	}
	t.Log("volume full as expected")
}

// execSelf is this test binary running the tests run matches, with env added, in a new
// mount namespace where it may mount: root's own, else in a new user namespace too where
// it is root (the user's own ID mapped to 0).
func execSelf(t *testing.T, run, env string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if os.Getuid() != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
	}
	return cmd
}
