package idempotency

import (
	"fmt"
	"testing"
)

// TestRecentKeysForgetsTheOldest: at capacity, a new key pushes out the
// oldest one; a key added twice takes one place.
func TestRecentKeysForgetsTheOldest(t *testing.T) {
	var r recentKeys
	key := func(i int) [2]string { return [2]string{"customer:c1", fmt.Sprint("k", i)} }
	r.add(key(0))
	r.add(key(0))
	for i := 1; i < recentCapacity; i++ {
		r.add(key(i))
	}
	if !r.seen(key(0)) || !r.seen(key(recentCapacity-1)) {
		t.Fatalf("at capacity, the first and the last key must both be remembered")
	}
	r.add(key(recentCapacity))
	if r.seen(key(0)) {
		t.Errorf("the oldest key is still remembered past capacity")
	}
	if !r.seen(key(1)) || !r.seen(key(recentCapacity)) || len(r.set) != recentCapacity {
		t.Errorf("remembered %d keys, want the last %d", len(r.set), recentCapacity)
	}
	if r.seen([2]string{"customer:c2", "k1"}) {
		t.Errorf("a key of another scope is taken for a seen one")
	}
}
