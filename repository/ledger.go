package repository

import (
	"context"
	"errors"
	"fmt"

	"github.com/payd/payd/domain"
)

// ledgerRow is a row of ledger_entries. Money is in integer minor units.
type ledgerRow struct {
	ID          string  `gorm:"column:id"`
	OrderID     string  `gorm:"column:order_id"`
	Kind        string  `gorm:"column:kind"`
	Reference   string  `gorm:"column:reference"`
	ChargeID    string  `gorm:"column:charge_id"`
	Currency    string  `gorm:"column:currency"`
	AmountMinor int64   `gorm:"column:amount_minor"`
	Source      string  `gorm:"column:source"`
	Actor       string  `gorm:"column:actor"`
	Note        string  `gorm:"column:note"`
	CreatedAt   utcTime `gorm:"column:created_at"`
}

// TableName tells GORM the table.
func (ledgerRow) TableName() string { return "ledger_entries" }

// insertLedgerEntry is Append's statement, written out: PayBatch.SucceedAndPay
// sends it too, guarded by the order's payment. A plain INSERT, so that a
// taken reference fails it (Append reads that as a repeat; the batch rolls
// back) and a CHECK it breaks fails it too: INSERT IGNORE would turn both
// into warnings, and SQLite's ON CONFLICT would differ between the two
// callers.
const insertLedgerEntry = `INSERT INTO ledger_entries (id, order_id, kind, reference, charge_id, currency,
	amount_minor, source, actor, note, created_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// args are insertLedgerEntry's arguments.
func (r ledgerRow) args() []any {
	return []any{r.ID, r.OrderID, r.Kind, r.Reference, r.ChargeID, r.Currency,
		r.AmountMinor, r.Source, r.Actor, r.Note, r.CreatedAt}
}

// ledgerFromDomain converts e, refusing an entry the ledger must never
// hold: an unknown kind or source, no reference or order, or an amount
// that is not a positive, exact number of minor units of a currency payd
// knows. The database's CHECKs hold the same sets; this says which rule
// an entry broke.
func ledgerFromDomain(e domain.LedgerEntry) (ledgerRow, error) {
	switch {
	case !e.Kind.Valid():
		return ledgerRow{}, fmt.Errorf("unknown ledger kind %q", e.Kind)
	case !e.Source.Valid():
		return ledgerRow{}, fmt.Errorf("unknown ledger source %q", e.Source)
	case e.Reference == "":
		return ledgerRow{}, errors.New("ledger entry has no reference")
	case e.OrderID == "":
		return ledgerRow{}, errors.New("ledger entry has no order")
	}
	amount, err := toMinor(e.Amount, e.Currency, "amount")
	if err != nil {
		return ledgerRow{}, err
	}
	if amount <= 0 {
		return ledgerRow{}, fmt.Errorf("ledger amount %s is not positive", e.Amount)
	}
	return ledgerRow{
		ID: e.ID, OrderID: e.OrderID, Kind: string(e.Kind), Reference: e.Reference, ChargeID: e.ChargeID,
		Currency: string(e.Currency), AmountMinor: amount, Source: string(e.Source), Actor: e.Actor,
		Note: e.Note, CreatedAt: ts(e.CreatedAt),
	}, nil
}

func (r ledgerRow) toDomain() domain.LedgerEntry {
	c := domain.Currency(r.Currency)
	return domain.LedgerEntry{
		ID: r.ID, OrderID: r.OrderID, Kind: domain.LedgerKind(r.Kind), Reference: r.Reference, ChargeID: r.ChargeID,
		Amount: domain.FromMinorUnits(r.AmountMinor, c), Currency: c, Source: domain.LedgerSource(r.Source),
		Actor: r.Actor, Note: r.Note, CreatedAt: r.CreatedAt.time(),
	}
}

// LedgerStore keeps each order's ledger (ADR 0030): entries are inserted
// once and never updated or deleted. The unique index on reference is what
// records one movement of money once, however many times and by however
// many of the pay reply, webhooks, the recoverer and reconciliation it is
// learned, concurrently or not.
type LedgerStore struct{ db *DB }

// NewLedgerStore returns a LedgerStore on db.
func NewLedgerStore(db *DB) *LedgerStore { return &LedgerStore{db: db} }

// Append stores e and reports true, or reports false when an entry with
// e's reference is stored already (a repeat is never an error). In a
// caller's transaction the repeat leaves the transaction usable: the
// failed INSERT is undone alone, on MySQL/MariaDB (InnoDB rolls back the
// statement) as on SQLite (ABORT rolls back the statement), and the
// caller's other writes stand. Of racing appenders of one reference,
// exactly one gets true: the index decides.
func (s *LedgerStore) Append(ctx context.Context, e domain.LedgerEntry) (bool, error) {
	row, err := ledgerFromDomain(e)
	if err != nil {
		return false, fmt.Errorf("append ledger entry %s: %w", e.Reference, err)
	}
	_, err = s.db.exec(ctx, insertLedgerEntry, row.args()...)
	switch {
	case err == nil:
		return true, nil
	case violatesIndex(err, "ledger_entries", "reference"):
		return false, nil
	case isUniqueViolation(err):
		// The primary key: the same entry appended again (its ID and its
		// reference) is a repeat too; another entry's ID is an error.
		if stored, ferr := s.findByReference(ctx, e.Reference); ferr == nil && stored.ID == e.ID {
			return false, nil
		}
	}
	return false, fmt.Errorf("append ledger entry %s: %w", e.Reference, err)
}

// Booked reports which of references have an entry: one query, by the
// unique reference index.
func (s *LedgerStore) Booked(ctx context.Context, references []string) (map[string]bool, error) {
	out := make(map[string]bool, len(references))
	if len(references) == 0 {
		return out, nil
	}
	var found []string
	if err := s.db.conn(ctx).Model(&ledgerRow{}).Where("reference IN ?", references).Pluck("reference", &found).Error; err != nil {
		return nil, fmt.Errorf("booked of %d references: %w", len(references), err)
	}
	for _, r := range found {
		out[r] = true
	}
	return out, nil
}

// ListByOrders returns the entries of the orders ids, oldest first, by
// order ID: one query, by ledger_entries' order index.
func (s *LedgerStore) ListByOrders(ctx context.Context, ids []string) (map[string][]domain.LedgerEntry, error) {
	out, err := groupedIn(ctx, s.db, "order_id", ids, "order_id, created_at, id",
		func(r ledgerRow) string { return r.OrderID }, ledgerRow.toDomain)
	if err != nil {
		return nil, fmt.Errorf("ledgers of %d orders: %w", len(ids), err)
	}
	return out, nil
}

// findByReference returns the entry stored under reference.
func (s *LedgerStore) findByReference(ctx context.Context, reference string) (domain.LedgerEntry, error) {
	var row ledgerRow
	if err := s.db.conn(ctx).Where("reference = ?", reference).Take(&row).Error; err != nil {
		return domain.LedgerEntry{}, err
	}
	return row.toDomain(), nil
}

// ListByOrder returns an order's entries, oldest first (by created_at,
// then ID: the IDs are UUIDv7, so ties keep the order of creation).
func (s *LedgerStore) ListByOrder(ctx context.Context, orderID string) ([]domain.LedgerEntry, error) {
	var rows []ledgerRow
	err := s.db.conn(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list ledger of order %s: %w", orderID, err)
	}
	out := make([]domain.LedgerEntry, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}
