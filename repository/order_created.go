package repository

import (
	"sync"
	"time"

	"github.com/payd/payd/domain"
)

// createdCapacity is how many orders an OrderStore remembers after
// creating them: at a few hundred bytes each, a few MiB at most.
const createdCapacity = 10_000

// createdOrders remembers the orders this process created last, as they
// were written (ADR 0034), so the pay that usually follows a creation can
// claim the order without reading it first. It is a hint, never the
// truth: the claim is guarded by the version remembered here, and every
// change to an order raises its version, so a remembered order that has
// changed since (on this replica or another) is never claimed on its
// word. Each order is handed out once; the oldest is forgotten first.
type createdOrders struct {
	mu   sync.Mutex
	byID map[string]createdOrder
	ring []string // IDs in the order remembered; ring[next] goes next
	next int
}

// createdOrder is an order's rows as a read would return them.
type createdOrder struct {
	row   orderRow
	items []itemRow
}

func newCreatedOrders(capacity int) *createdOrders {
	return &createdOrders{byID: make(map[string]createdOrder, capacity), ring: make([]string, capacity)}
}

// remember keeps the rows just written for id, with their timestamps cut
// to what the database keeps (microseconds, timeLayout).
func (c *createdOrders) remember(row orderRow, items []itemRow) {
	row.ExpiresAt, row.CreatedAt, row.UpdatedAt = stored(row.ExpiresAt), stored(row.CreatedAt), stored(row.UpdatedAt)
	if row.PaidAt != nil {
		p := stored(*row.PaidAt)
		row.PaidAt = &p
	}
	if row.CaptureBefore != nil {
		p := stored(*row.CaptureBefore)
		row.CaptureBefore = &p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.ring[c.next]; old != "" {
		delete(c.byID, old)
	}
	c.ring[c.next] = row.ID
	c.next = (c.next + 1) % len(c.ring)
	c.byID[row.ID] = createdOrder{row: row, items: items}
}

// take returns the remembered order id and forgets it.
func (c *createdOrders) take(id string) (domain.Order, bool) {
	c.mu.Lock()
	o, ok := c.byID[id]
	delete(c.byID, id)
	c.mu.Unlock()
	if !ok {
		return domain.Order{}, false
	}
	return o.row.toDomain(o.items), true
}

// stored is t as the database gives it back: UTC, microseconds.
func stored(t utcTime) utcTime { return ts(t.time().Truncate(time.Microsecond)) }
