// Package redis holds everything the operator says to Redis: a small Admin interface over
// go-redis (with ACL users and TLS), Observe, which reads every member's view into a
// topology.ClusterState, and the executors that carry out the plans package topology
// makes: bootstrap, healing, promotions, finishing open slots, slot migration and
// resizing, replica sync checks and live configuration.
//
// Executors only carry out a plan. Progress is always re-read from Redis, never
// remembered, so an operator killed half-way resumes from what the nodes themselves
// report.
package redis
