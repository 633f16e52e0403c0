package topology

import "time"

// Sizing a MIGRATE of big keys: a key is timed by its MEMORY USAGE (redis/bigkey.go moves
// it). The sizing of slot groups is in redis/migrategroup.go, of key batches in redis/movekeys.go.

const (
	// BigKeyRate is the MEMORY USAGE a RESTORE is assumed to rebuild per second, half of
	// what a loaded 2-core machine measured (a 2,000,000-member sorted set: 202 MB of
	// MEMORY USAGE, 43 MB of DUMP, MIGRATE in 7.9 s, of which 6.3 s were RESTORE).
	BigKeyRate = 16 << 20
	// MaxKeyTimeout caps the timeout of one key's MIGRATE. A key that needs more blocks
	// its source for several node timeouts; it is tried with this timeout and, if it does
	// not move, named as stuck.
	MaxKeyTimeout = 20 * time.Second
)

// BigKeyTimeout is the MIGRATE timeout a key of `usage` bytes (MEMORY USAGE) calls for:
// at least floor, at most MaxKeyTimeout.
func BigKeyTimeout(usage int64, floor time.Duration) time.Duration {
	t := time.Duration(float64(usage) / BigKeyRate * float64(time.Second))
	return min(max(t, floor), max(floor, MaxKeyTimeout))
}
