package render

import (
	"crypto/sha256"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// maxCachedRenders bounds the cache: one entry per distinct (spec, redis.conf) seen
// recently. Past it the cache starts over; more clusters than this only cost misses.
const maxCachedRenders = 256

// renderCache remembers the objects of recent renders by a hash of their input. The
// operator renders the same unchanged CR on every reconcile, and a CUE evaluation
// costs milliseconds where a copy costs microseconds (docs/templates.md has figures).
// Rendering is a pure function of the input, so a hit is exactly what a render gives.
type renderCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte][]*unstructured.Unstructured
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

// get returns copies, so callers may change them (the controller adds owner
// references) without touching the cached objects.
func (c *renderCache) get(key [sha256.Size]byte) ([]*unstructured.Unstructured, bool) {
	c.mu.Lock()
	objs, ok := c.entries[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	return deepCopy(objs), true
}

func (c *renderCache) put(key [sha256.Size]byte, objs []*unstructured.Unstructured) {
	stored := deepCopy(objs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCachedRenders {
		c.entries = make(map[[sha256.Size]byte][]*unstructured.Unstructured)
	}
	c.entries[key] = stored
}

func deepCopy(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
