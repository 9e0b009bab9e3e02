package idempotency

import "sync"

// recentCapacity is how many keys an Engine remembers having looked at:
// with scope and key, a few MiB at most.
const recentCapacity = 10_000

// recentKeys remembers the last keys this process looked at (ADR 0034).
// A key it has not seen is most likely new, and Begin tries to insert its
// record at once; a key it has seen is most likely a repeat (a replay, a
// double click), and Begin reads the record first. Only the cost depends
// on it: either way the record decides.
type recentKeys struct {
	mu   sync.Mutex
	set  map[[2]string]struct{}
	ring [][2]string // in the order added; ring[next] goes next
	next int
}

// seen reports whether k was added and is still remembered.
func (r *recentKeys) seen(k [2]string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.set[k]
	return ok
}

// add remembers k, forgetting the oldest key at capacity.
func (r *recentKeys) add(k [2]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set == nil {
		r.set = make(map[[2]string]struct{}, recentCapacity)
		r.ring = make([][2]string, recentCapacity)
	}
	if _, ok := r.set[k]; ok {
		return
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = k
	r.next = (r.next + 1) % len(r.ring)
	r.set[k] = struct{}{}
}
