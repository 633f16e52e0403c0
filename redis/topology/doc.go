// Package topology is the operator's pure reasoning about a Redis Cluster: it parses what
// Redis reports (CLUSTER NODES, CLUSTER INFO, INFO replication, INFO memory), holds one
// observation of every member as a ClusterState with the questions the phase machine asks
// of it (formed, agreed, slots covered or lost, failovers pending), and plans the writes
// that bootstrap, heal, promote, rebalance and resize a cluster.
//
// It does no I/O: every planner is a function of an observation, so it can be
// table-tested and fuzzed, and package redis carries the plans out. A test holds its
// imports to the standard library's pure packages.
package topology
