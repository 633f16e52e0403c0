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
