package redistest

import (
	"fmt"
	"os"
	"path/filepath"
)

// ImageBinary unpacks the image bin/images/IMAGE.tar into dir and returns the path of a
// script that runs the image's binary (any of them: valkey-cli too, where ServerBinary
// gives its server only) with the image's own loader and libraries, by exec
// (so the PID is the binary's). A dir the image was unpacked into already is used as it is.
func ImageBinary(dir, image, binary string) (string, error) {
	tarPath := filepath.Join(repoRoot(), "bin", "images", image+".tar")
	if _, err := os.Stat(filepath.Join(dir, "usr", "bin", binary)); err != nil {
		if err := unpackOCI(tarPath, dir); err != nil {
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
