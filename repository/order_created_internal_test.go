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
	// A taken order leaves its slot behind; filling the ring again
	// forgets nothing that is still remembered by mistake.
	c.remember(orderRow{ID: "o4"}, nil)
	c.remember(orderRow{ID: "o5"}, nil)
	if len(c.byID) != 2 {
		t.Errorf("remembered %d orders, want 2", len(c.byID))
	}
}
