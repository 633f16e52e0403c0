// Package redis holds everything the operator says to Redis: parsing of CLUSTER NODES and
// CLUSTER INFO, a small Admin interface over go-redis, a read-only observation of the
// cluster with the guards the phase machine needs, and the bootstrap that forms a cluster.
//
// Planners are pure functions of an observation so they can be table-tested; executors
// only carry out a plan. Progress is always re-read from Redis, never remembered, so an
// operator killed half-way resumes from what the nodes themselves report.
package redis
