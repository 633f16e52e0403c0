package metricsauth

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOperatorDoesNotLinkTheAPIServerLibrary keeps k8s.io/apiserver out of the operator's
// binary: it came only with controller-runtime's metrics filter, which this package
// replaces, and it is 9 MB of resident code (see the package comment).
func TestOperatorDoesNotLinkTheAPIServerLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "..").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed %d packages, too few for the operator: %q", len(deps), out)
	}
	var linked []string
	for _, p := range deps {
		if p == "k8s.io/apiserver" || strings.HasPrefix(p, "k8s.io/apiserver/") || strings.HasPrefix(p, "github.com/google/cel-go/") {
			linked = append(linked, p)
		}
	}
	if len(linked) > 0 {
		t.Errorf("the operator links %d packages of k8s.io/apiserver and CEL again, %s first; find what imports it with `go list -deps -f '{{.ImportPath}} {{.Imports}}' .`", len(linked), linked[0])
	}
}
