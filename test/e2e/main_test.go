//go:build e2e

// Package e2e is the end-to-end suite: it runs on the devcluster (real API server, controller
// manager and redis-server processes), brought up once for the whole `go test` run.
package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// Tests run one at a time unless they call t.Parallel(); `make test` runs the parallel ones
// four at a time (hack/test.sh, -parallel 4), after every other test has run. A test may be
// parallel when it needs nothing but namespaces of its own and the shared operator (operator,
// formDemo, startFault): not one that stops, kills or replaces the shared operator (or runs
// one of its own beside it), takes a node down or cuts it off, needs the nodes empty, changes
// the CRDs or other cluster-wide objects, or bounds a time the load of other tests stretches
// (a deleted master's handover under a second, an idle reconcile seen within 5 s, a TLS
// roll with no write over the writer's 2 s timeout). Its namespace names must be its own:
// CreateNamespace fails on one that exists.

// stack is the devcluster shared by every test of this run.
var stack *framework.Stack

func TestMain(m *testing.M) {
	s, err := framework.Up()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stack = s
	code := m.Run()
	stopOperator()
	if err := s.Down(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
