// Package fsm is the phase machine of a RedisCluster (docs/fsm.md).
//
// It is pure: it holds no client, speaks to no Redis and reads no clock. The
// controller observes the world into an Observation, calls Evaluate with the
// phase in status, and acts for the phase it gets back. Progress (which slots
// have moved, which pods are updated) lives in Redis and Kubernetes, never in
// the phase, so an operator killed mid-way observes the same facts again and
// lands on the same decision.
//
// The transitions are one table (table.go) that reads like the table in
// docs/fsm.md; the same table drives the looplab/fsm machine, the guard checks,
// the Mermaid diagram and the generated part of docs/fsm.md.
package fsm
