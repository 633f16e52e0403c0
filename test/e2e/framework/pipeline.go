package framework

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-redis/redis/v8"
)

// Pipeline runs cmds, each a command whose args[1] is its key, on the masters that own
// their keys: one goroutine per master, in pipelines of batch commands (fewer when they
// hold more than pipelineArgs arguments: big commands, within the clients' 2 s timeouts), each master's
// commands in the order given (a key's SET then PEXPIREAT stay in order). It returns the
// results in the order of cmds; err is the first pipeline that could not be run (a
// command's own error, or redis.Nil, is in its result). The slot table is read once: for a
// cluster whose slots do not move meanwhile (loading, reading back).
func (r *Router) Pipeline(ctx context.Context, cmds [][]any, batch int) ([]*redis.Cmd, error) {
	r.mu.Lock()
	r.fresh = time.Time{}
	r.mu.Unlock()
	if err := r.Refresh(ctx); err != nil {
		return nil, err
	}
	byOwner := map[string][]int{}
	for i, c := range cmds {
		key, ok := c[1].(string)
		if !ok {
			return nil, fmt.Errorf("command %v: its key is not a string", c)
		}
		o := r.Owner(KeySlot(key))
		byOwner[o] = append(byOwner[o], i)
	}
	out := make([]*redis.Cmd, len(cmds))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for addr, idx := range byOwner {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := r.client(addr)
			for start, end := 0, 0; start < len(idx); start = end {
				args := 0
				for end = start; end < len(idx) && end-start < batch && args < pipelineArgs; end++ {
					args += len(cmds[idx[end]])
				}
				p := c.Pipeline()
				for _, i := range idx[start:end] {
					out[i] = p.Do(ctx, cmds[i]...)
				}
				_, _ = p.Exec(ctx)
				// A pipeline that could not be written or read fails every command with
				// the same network error; a command's own error is its result's.
				if err := out[idx[end-1]].Err(); err != nil && isNetErr(err) {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("pipeline to %s: %w", addr, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, first
}

// pipelineArgs bounds the arguments of one pipeline of Pipeline.
const pipelineArgs = 20000

// isNetErr tells a connection's failure from a command's own error reply.
func isNetErr(err error) bool {
	if err == redis.Nil {
		return false
	}
	_, reply := err.(redis.Error)
	return !reply
}
