package redis

import (
	"context"
	"errors"
	"fmt"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// Setting is one directive and its value (topology.Setting; the parsing of redis.conf
// and the list of live directives are topology's, redisconf.go).
type Setting = topology.Setting

// ConfigRefusedError says which directive a node refused and Redis' words.
type ConfigRefusedError struct {
	Addr    string
	Setting Setting
	Err     error
}

func (e *ConfigRefusedError) Error() string {
	return fmt.Sprintf("Redis refuses %s %q: %v", e.Setting.Name, e.Setting.Value, e.Err)
}

func (e *ConfigRefusedError) Unwrap() error { return e.Err }

// errUnknownParameter: CONFIG GET names no such parameter (a Redis older than it).
var errUnknownParameter = errors.New("Redis does not know it")

// ConfigGet reads one parameter with CONFIG GET.
func (a *admin) ConfigGet(ctx context.Context, name string) (string, error) {
	v, err := a.c.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("failed to read %s on %s: %w", name, a.addr, err)
	}
	if len(v) != 2 {
		return "", fmt.Errorf("failed to read %s on %s: %w", name, a.addr, errUnknownParameter)
	}
	return fmt.Sprint(v[1]), nil
}

// ConfigSet sets one parameter with CONFIG SET; a refusal is a *ConfigRefusedError.
func (a *admin) ConfigSet(ctx context.Context, name, value string) error {
	if err := a.c.ConfigSet(ctx, name, value).Err(); err != nil {
		if isRedisError(err) {
			return &ConfigRefusedError{Addr: a.addr, Setting: Setting{Name: name, Value: value}, Err: err}
		}
		return fmt.Errorf("failed to set %s on %s: %w", name, a.addr, err)
	}
	return nil
}

// isRedisError tells an error Redis answered (ERR …) from a network failure.
func isRedisError(err error) bool {
	_, ok := err.(interface{ RedisError() })
	return ok
}

// ApplyLive sets every setting on every node at addrs, in order. A setting a node refuses
// (or a node that stops answering) leaves no node half-changed: every setting already
// made is set back, on every node touched, to what CONFIG GET read before, and the first
// error is returned (a *ConfigRefusedError names the directive). The node at addrs[0]
// tries the whole list first, so a refusal usually touches that node alone.
func ApplyLive(ctx context.Context, f Factory, addrs []string, settings []Setting) error {
	var undo []func()
	rollBack := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	for _, addr := range addrs {
		steps, err := applyLiveOn(ctx, f.For(addr), settings)
		undo = append(undo, steps...)
		if err != nil {
			rollBack()
			return err
		}
	}
	return nil
}

// applyLiveOn sets the settings on one node and returns how to set each back.
func applyLiveOn(ctx context.Context, a Admin, settings []Setting) ([]func(), error) {
	var undo []func()
	for _, s := range settings {
		was, err := a.ConfigGet(ctx, s.Name)
		if err != nil {
			return undo, err
		}
		if err := a.ConfigSet(ctx, s.Name, s.Value); err != nil {
			return undo, err
		}
		name := s.Name
		undo = append(undo, func() { _ = a.ConfigSet(context.WithoutCancel(ctx), name, was) })
	}
	return undo, nil
}

// TryLive sets the settings on the node at addr and sets them back, whether or not Redis
// took them: a refusal found there (a *ConfigRefusedError) leaves every node as it was.
func TryLive(ctx context.Context, f Factory, addr string, settings []Setting) error {
	undo, err := applyLiveOn(ctx, f.For(addr), settings)
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
	return err
}
