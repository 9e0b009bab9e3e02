package repository

import "testing"

// TestCreatedOrdersForgetsTheOldest: at capacity, remembering an order
// forgets the oldest one, and nothing else.
func TestCreatedOrdersForgetsTheOldest(t *testing.T) {
	c := newCreatedOrders(2)
	for _, id := range []string{"o1", "o2", "o3"} {
		c.remember(orderRow{ID: id, Status: "pending"}, nil)
	}
	if _, ok := c.take("o1"); ok {
		t.Errorf("o1, the oldest of three at capacity 2, is still remembered")
	}
	for _, id := range []string{"o2", "o3"} {
		if o, ok := c.take(id); !ok || o.ID != id {
			t.Errorf("take(%s) = %q, %v, want it remembered", id, o.ID, ok)
		}
	}
	// A taken order leaves its slot behind; the ring still forgets in
	// the order it remembered: at capacity 2, o6 pushes out o4 alone.
	for _, id := range []string{"o4", "o5", "o6"} {
		c.remember(orderRow{ID: id}, nil)
	}
	if _, ok := c.take("o4"); ok {
		t.Errorf("o4, the oldest of o4–o6 at capacity 2, is still remembered")
	}
	if len(c.byID) != 2 {
		t.Errorf("remembered %d orders, want 2 (o5, o6)", len(c.byID))
	}
	for _, id := range []string{"o5", "o6"} {
		if _, ok := c.take(id); !ok {
			t.Errorf("%s was forgotten, want it remembered", id)
		}
	}
}
