package domain

import "time"

// MaxPageSize bounds every list.
const MaxPageSize = 100

// OrderFilter selects orders for a list. Zero fields do not filter.
// Lists are ordered newest first by ID (UUIDv7 IDs are time-ordered); Cursor
// is the ID of the last order of the previous page.
type OrderFilter struct {
	CustomerID string
	Status     OrderStatus
	From, To   time.Time // created_at in [From, To)
	Cursor     string
	Limit      int
}

// OrderPage is one page of a list. NextCursor is empty on the last page.
type OrderPage struct {
	Orders     []Order
	NextCursor string
}
