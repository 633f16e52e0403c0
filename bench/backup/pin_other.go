//go:build !linux

package main

import (
	"context"
	"errors"

	"github.com/hc-middleware/redis-cluster-operator/test/e2e/framework"
)

// pinned: -pin sets CPU affinities, which only Linux has (pin.go).
type pinned struct{}

func pinClients(int, int) (*pinned, error) { return nil, errors.New("-pin works on Linux only") }

func (p *pinned) servers(context.Context, *framework.Stack, string, string, int) (bool, error) {
	return p == nil, nil
}

func (p *pinned) mustServers(context.Context, *framework.Stack, string, string, int) error {
	return nil
}

func (p *pinned) unpin() {}
