package redistest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	goredis "github.com/go-redis/redis/v8"
)

// CommandCounter is a go-redis hook that counts the commands sent, by name ("cluster
// meet", "dbsize"). Tests use Writes() to prove that a reconcile with nothing to do sends
// no state-changing command to Redis.
type CommandCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

var _ goredis.Hook = (*CommandCounter)(nil)

// NewCommandCounter returns an empty counter; add it to Options.Hooks.
func NewCommandCounter() *CommandCounter {
	return &CommandCounter{counts: map[string]int{}}
}

// readCommands are the commands known not to change state. Everything else counts as a
// write, so a new command is counted until someone proves it is harmless.
var readCommands = map[string]bool{
	"ping": true, "hello": true, "auth": true, "select": true, "echo": true, "client setname": true,
	"info": true, "dbsize": true, "get": true, "exists": true, "ttl": true, "type": true, "scan": true,
	"config get": true, "command": true, "role": true, "readonly": true,
	"cluster nodes": true, "cluster info": true, "cluster slots": true, "cluster shards": true,
	"cluster myid": true, "cluster keyslot": true, "cluster countkeysinslot": true,
	"cluster getkeysinslot": true, "cluster count-failure-reports": true,
	"cluster replicas": true, "cluster slaves": true, "cluster links": true, "memory usage": true,
	"acl users": true,
}

// commandName is the lower-cased command, with the subcommand for container commands.
func commandName(cmd goredis.Cmder) string {
	args := cmd.Args()
	if len(args) == 0 {
		return ""
	}
	name := strings.ToLower(fmt.Sprint(args[0]))
	switch name {
	case "cluster", "config", "client", "script", "object", "memory", "acl":
		if len(args) > 1 {
			name += " " + strings.ToLower(fmt.Sprint(args[1]))
		}
	}
	return name
}

func (c *CommandCounter) add(cmds ...goredis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.counts[commandName(cmd)]++
	}
}

// BeforeProcess counts the command before it is sent, so a write that fails still counts.
func (c *CommandCounter) BeforeProcess(ctx context.Context, cmd goredis.Cmder) (context.Context, error) {
	c.add(cmd)
	return ctx, nil
}

func (c *CommandCounter) AfterProcess(context.Context, goredis.Cmder) error { return nil }

func (c *CommandCounter) BeforeProcessPipeline(ctx context.Context, cmds []goredis.Cmder) (context.Context, error) {
	c.add(cmds...)
	return ctx, nil
}

func (c *CommandCounter) AfterProcessPipeline(context.Context, []goredis.Cmder) error { return nil }

// Count is how many times the named command ("cluster meet") was sent.
func (c *CommandCounter) Count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[name]
}

// Writes is how many commands were sent that may change state.
func (c *CommandCounter) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for name, k := range c.counts {
		if !readCommands[name] {
			n += k
		}
	}
	return n
}

// WriteNames lists the state-changing commands sent, with counts, for failure messages.
func (c *CommandCounter) WriteNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name, k := range c.counts {
		if !readCommands[name] {
			out = append(out, fmt.Sprintf("%s x%d", name, k))
		}
	}
	sort.Strings(out)
	return out
}

// Reset forgets every count, e.g. after the setup part of a test.
func (c *CommandCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}
