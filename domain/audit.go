package domain

import "time"

// AuditEntry records one operator action: who, what, when, under which
// request ID, and with what result.
type AuditEntry struct {
	ID        string
	Actor     string // "admin" (one shared admin token) or "system"
	Action    string // e.g. refund, reconcile, resolve_discrepancy
	OrderID   string // when the action concerns one order
	Target    string // what else it concerns (a run or discrepancy ID)
	RequestID string // the idempotency key of the request
	Result    int    // the HTTP status the action answered
	Detail    string // a short JSON document of the inputs (never secrets)
	CreatedAt time.Time
}

// ReconciliationRun is one comparison of payd's books with the provider's
// for a time window.
type ReconciliationRun struct {
	ID            string
	Source        string // provider or csv
	From, To      time.Time
	DryRun        bool
	Matched       int
	Found         int // discrepancies seen in this run (new or already known)
	New           int // discrepancies this run recorded for the first time
	CreatedAt     time.Time
	FinishedAt    *time.Time
	Discrepancies []Discrepancy
}

// ReconcileWindow is one window of scheduled reconciliation
// (PAYD_RECONCILE_EVERY): [From, To), claimed by one replica at a time,
// finished once by the run RunID.
type ReconcileWindow struct {
	From, To    time.Time
	ClaimedBy   string // the claim's owner, a fresh ID per claim
	LockedUntil time.Time
	Claims      int // how many times it was claimed (more than 1: taken over)
	RunID       string
	FinishedAt  *time.Time
}
