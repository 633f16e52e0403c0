package render

import (
	"crypto/sha256"
	"sync"
)

// maxCachedRenders bounds the cache: one entry per distinct (spec, redis.conf) seen
// recently. Past it the cache starts over; more clusters than this only cost misses.
const maxCachedRenders = 256

// renderCache remembers the objects of recent renders by a hash of their input, as the
// JSON the template produced. The operator renders the same unchanged CR on every
// reconcile, and a CUE evaluation costs milliseconds where decoding the JSON again costs
// about a tenth of one (docs/templates.md has figures). Rendering is a pure function of
// the input, so a hit is exactly what a render gives; and JSON, not decoded objects, is
// kept because it is several times smaller, and every hit decodes new objects, which
// callers may change (the controller adds owner references).
type renderCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte][]byte
}

func cacheKey(input []byte, userRedisConf string) [sha256.Size]byte {
	h := sha256.New()
	h.Write(input)
	h.Write([]byte{0})
	h.Write([]byte(userRedisConf))
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

func (c *renderCache) get(key [sha256.Size]byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, ok := c.entries[key]
	return out, ok
}

// put keeps out, which the caller must not change.
func (c *renderCache) put(key [sha256.Size]byte, out []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCachedRenders {
		c.entries = make(map[[sha256.Size]byte][]byte)
	}
	c.entries[key] = out
}
