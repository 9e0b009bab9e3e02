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
	// Attempt, for operators, keeps orders with at least one payment
	// attempt in that status: failed lists the orders a card was declined
	// for, paid since or not.
	Attempt  AttemptStatus
	From, To time.Time // created_at in [From, To)
	Cursor   string
	Limit    int
}

// OrderPage is one page of a list. NextCursor is empty on the last page.
type OrderPage struct {
	Orders     []Order
	NextCursor string
	// LastAttempts, in the operators' search, is each order's newest
	// payment attempt, by order ID; an order never paid for has none.
	LastAttempts map[string]Attempt
}

// RunFilter selects reconciliation runs for a list, newest first by ID;
// Cursor is the ID of the last run of the previous page.
type RunFilter struct {
	Cursor string
	Limit  int
}

// RunPage is one page of reconciliation runs (without their findings).
// NextCursor is empty on the last page.
type RunPage struct {
	Runs       []ReconciliationRun
	NextCursor string
}

// DiscrepancyFilter selects discrepancies for a list, whoever found them
// (a webhook, a pay reply, the recoverer, a reconciliation run), newest
// first by ID. Zero fields do not filter.
type DiscrepancyFilter struct {
	Status  DiscrepancyStatus
	Type    DiscrepancyType
	OrderID string
	Cursor  string
	Limit   int
}

// DiscrepancyPage is one page of discrepancies.
type DiscrepancyPage struct {
	Discrepancies []Discrepancy
	NextCursor    string
}

// CustomerFilter selects customers for an operator's list, newest first by
// ID. Email, when set, is matched exactly after NormalizeEmail.
type CustomerFilter struct {
	Email  string
	Cursor string
	Limit  int
}

// CustomerPage is one page of customers.
type CustomerPage struct {
	Customers  []Customer
	NextCursor string
}
