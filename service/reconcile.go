package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// ChargeLister lists the provider's charges in a time window, a page at a
// time: after is the Next of the page before ("" for the first).
type ChargeLister interface {
	ListCharges(ctx context.Context, from, to time.Time, after string) (domain.ChargePage, error)
}

// Reconciler compares payd's books with the provider's for a window and
// records every disagreement once (ADR 0008): charges, and refunds when it
// has the provider's (its refund list, or a settlement file that names
// each refund). A discrepancy already known — found by a webhook or an
// earlier run, open or resolved — is counted as found again but not
// recorded again, so re-running a resolved window finds nothing new.
type Reconciler struct {
	Tx            Transactor // a run, its discrepancies and findings are written together or not at all
	Orders        OrderStore
	Attempts      AttemptStore
	Discrepancies DiscrepancyStore
	Runs          RunStore
	Provider      ChargeLister
	Lease         time.Duration
	Now           func() time.Time
	Observer      Observer // optional: told of each discrepancy a run newly records

	// RefundStore, optional, holds payd's refunds: without it refunds are
	// not compared.
	RefundStore RefundStore
	// Refunds, optional, lists the provider's refunds for a run against
	// the provider (nil: such a run compares no refunds).
	Refunds RefundLister
	// Outside, optional, records the refunds payd never asked for that a
	// run finds (Refunds.Outside); without it they stay open findings.
	Outside OutsideRecorder
	// Ledger, optional, tells a refund payd holds already (learned from a
	// webhook) from one it does not; a run against the provider also books
	// in it the successful charges of payd's orders the provider lists, so
	// a charge payd never learned of is money in its books all the same.
	Ledger LedgerStore
	// Disputes and DisputeBook, optional, have a run against the provider
	// bring payd's disputes in line with the provider's list of them
	// (a dispute event that never arrived is booked all the same).
	Disputes    DisputeLister
	DisputeBook *Disputes
	// Books, optional, repairs the orders a run touches from their
	// ledgers and asks the provider about refunds of payd's it does not
	// list (Refunds.Heal, Refunds.Recheck; ADR 0055).
	Books RefundBooks
	// Charges, optional, is the provider's record of a charge by its ID: a
	// settlement file's line under the key of an attempt whose charge payd
	// does not know yet is held to it (lineDisagrees).
	Charges ChargeFinder
	// Checkpoints, optional, keeps the progress of runs that have a
	// resume key (ReconcileRequest.Resume), so that one payd did not
	// finish resumes from its last page (ADR 0068), and one recorded
	// answers as recorded when asked again. ResumeWithin (the idempotency
	// TTL; 0: forever) is how long after its last page a run is resumed.
	Checkpoints  CheckpointStore
	ResumeWithin time.Duration
}

// ReconcileRequest is one run: a window, and either the provider's lists
// (File nil) or an uploaded settlement file.
type ReconcileRequest struct {
	From, To time.Time
	DryRun   bool
	// File, when set, is a settlement file, checked whole: the run
	// compares its charges, a page at a time, and the refunds it names
	// one by one (none when its Refunds are nil), instead of asking the
	// provider. nil: ask the provider.
	File *domain.Settlement
	// Source, when set, names who started the run instead of where its
	// records came from ("schedule": PAYD_RECONCILE_EVERY).
	Source string
	// Resume names the request: a run asked again under the same name,
	// for the same window, resumes the run that did not finish (the
	// operator's request retried under its idempotency key, the schedule's
	// window taken over; ADR 0068). Empty: the run keeps no checkpoint.
	Resume string
	// Guard, when set, runs inside the run's transaction once the run is
	// stored: an error rolls the whole run back. The schedule finishes its
	// window claim there, so a run is recorded exactly when its window is.
	Guard func(ctx context.Context, run domain.ReconciliationRun) error
}

// Run reconciles one window.
func (s *Reconciler) Run(ctx context.Context, req ReconcileRequest) (domain.ReconciliationRun, error) {
	if !req.From.Before(req.To) || req.To.Sub(req.From) > 31*24*time.Hour {
		return domain.ReconciliationRun{}, &domain.ValidationError{Field: "to", Reason: "the window must be non-empty, from before to, and at most 31 days"}
	}
	run := domain.ReconciliationRun{ID: newID(), Source: "provider", From: req.From.UTC(), To: req.To.UTC(), DryRun: req.DryRun, CreatedAt: s.Now().UTC()}
	switch {
	case req.File != nil:
		run.Source = "csv"
	case req.Source != "":
		run.Source = req.Source
	}
	cp, err := s.resume(ctx, &run, req)
	if err != nil {
		return domain.ReconciliationRun{}, err
	}
	if cp.recorded() {
		// Asked again after it was recorded (its answer was lost, or a
		// request that lost the run to this one's retry answered first).
		return s.FindRun(ctx, run.ID)
	}
	ctx = WithCause(ctx, domain.Cause{Kind: domain.CauseReconciliation, Ref: run.ID})
	w, err := s.compare(ctx, run, req, cp)
	if err != nil {
		return domain.ReconciliationRun{}, err
	}
	run.Matched = w.matched // charges: a refund that agrees is not counted
	if err := cp.hold(ctx); err != nil {
		return domain.ReconciliationRun{}, err // taken over: the refunds are the other's to compare
	}
	refunds, touched, err := s.refunds(ctx, run, req)
	if err != nil {
		return domain.ReconciliationRun{}, err
	}
	found := append(w.found, refunds...)
	if run.DryRun {
		_, err := s.keepAll(ctx, &run, found)
		return run, err
	}
	// Everything a run writes is written in one transaction, after every
	// read: a run that fails midway (the database goes away, a row is
	// refused) leaves no run with finished_at NULL and no finding behind;
	// the operator sees an error and runs it again. The exceptions are
	// money the provider's own lists show: a charge of payd's (compare)
	// and an outside refund (refunds) are booked in the ledger as the
	// run meets them, once, whatever happens to the run; a run that then
	// fails leaves them booked, with no trace of the run, and the next
	// run of the window keeps the trace.
	var fresh []domain.Discrepancy
	done := run
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		// InTx may run fn again after a conflict: each run starts from the
		// run as it was before the transaction, never from a rolled-back one.
		r := run
		r.Discrepancies = append([]domain.Discrepancy(nil), run.Discrepancies...)
		fresh = nil
		// Recorded by the process that holds the run, once: one that lost
		// it to a retry rolls back here, first thing.
		if err := cp.record(ctx); err != nil {
			return err
		}
		if err := s.Runs.Create(ctx, r); err != nil {
			return err
		}
		var err error
		if fresh, err = s.keepAll(ctx, &r, found); err != nil {
			return err
		}
		if err := s.Runs.Finish(ctx, r); err != nil {
			return err
		}

		if req.Guard != nil {
			if err := req.Guard(ctx, r); err != nil {
				return err
			}
		}
		done = r
		return nil
	})
	if err != nil {
		return domain.ReconciliationRun{}, err
	}
	run = done
	for _, d := range fresh {
		observing(s.Observer).DiscrepancyRecorded(ctx, d) // told once committed: a rolled-back run recorded nothing
	}
	if req.File == nil {
		if err := s.syncDisputes(ctx, run); err != nil {
			return run, err
		}
	}
	maps.Copy(w.refunded, touched) // touched may be nil: no refunds compared
	if err := s.healOrders(ctx, run, w.refunded); err != nil {
		return run, err
	}
	return run, nil
}

// syncDisputes brings payd's disputes in line with the provider's list of
// those opened in the run's window.
func (s *Reconciler) syncDisputes(ctx context.Context, run domain.ReconciliationRun) error {
	if s.Disputes == nil || s.DisputeBook == nil {
		return nil
	}
	ds, err := s.Disputes.ListDisputes(ctx, run.From, run.To)
	if err != nil {
		return fmt.Errorf("list provider disputes: %w", err)
	}
	for _, pd := range ds {
		if _, err := s.DisputeBook.Sync(ctx, pd, domain.SourceReconciliation); err != nil {
			return err
		}
	}
	return nil
}

// refunds compares refunds, if the run has the provider's, and returns
// the findings and the orders whose refunds it saw; a real run first
// records the outside refunds it found (recordOutside) and asks the
// provider about payd's refunds it does not list (recheck), a dry run
// records nothing.
func (s *Reconciler) refunds(ctx context.Context, run domain.ReconciliationRun, req ReconcileRequest) ([]domain.Discrepancy, map[string]bool, error) {
	listed, ok, err := s.refundsToCompare(ctx, run, req)
	if err != nil || !ok {
		return nil, nil, err
	}
	check, err := s.compareRefunds(ctx, run, listed, req.File != nil)
	if err != nil {
		return nil, nil, err
	}
	if req.File != nil {
		if err := s.confirmFileRefunds(ctx, run, &check); err != nil {
			return nil, nil, err
		}
	}
	if run.DryRun {
		return check.found, nil, nil
	}
	if err := s.recheck(ctx, &check); err != nil {
		return nil, nil, err
	}
	found, err := s.recordOutside(ctx, check)
	return found, check.orders, err
}

// keepAll keeps every finding of run, stamps it finished and returns the
// discrepancies nobody had recorded before.
func (s *Reconciler) keepAll(ctx context.Context, run *domain.ReconciliationRun, found []domain.Discrepancy) ([]domain.Discrepancy, error) {
	var fresh []domain.Discrepancy
	for _, d := range found {
		stored, isNew, err := s.keep(ctx, run, d)
		if err != nil {
			return nil, err
		}
		if isNew {
			fresh = append(fresh, stored)
		}
	}
	now := s.Now().UTC()
	run.FinishedAt = &now
	return fresh, nil
}

// keep records one finding (unless dry), links it to the run and returns
// it as stored, reporting whether it was new.
func (s *Reconciler) keep(ctx context.Context, run *domain.ReconciliationRun, d domain.Discrepancy) (domain.Discrepancy, bool, error) {
	run.Found++
	status := d.Status
	d = newDiscrepancy(d, s.Now)
	if status != "" {
		d.Status = status // a refund recorded as found: resolved at once
	}
	d.RunID = run.ID
	if run.DryRun {
		run.Discrepancies = append(run.Discrepancies, d)
		return d, false, nil
	}
	stored, isNew, err := s.Discrepancies.Record(ctx, d)
	if err != nil {
		return domain.Discrepancy{}, false, err
	}
	if isNew {
		run.New++
	}
	run.Discrepancies = append(run.Discrepancies, stored)
	return stored, isNew, s.Runs.AddFinding(ctx, run.ID, stored.ID)
}

// chargeBatch is how many of the provider's successful charges a run
// decides at once: one read of their attempts, one of their orders and
// one of their ledger entries, however many the window holds (ADR 0066).
const chargeBatch = 500

// compare walks the provider's successful charges, a page at a time (a
// settlement file's when the request has one), then payd's paid orders
// and stuck payments, and returns what disagrees, how many charges
// matched and which of the window's paid orders have refunds. Of the
// charges it keeps only the keys of the successful ones, for
// missingCharges; a run against the provider's own list (not a file, not
// dry) also books what it shows of payd's orders, once (ADR 0030).
func (s *Reconciler) compare(ctx context.Context, run domain.ReconciliationRun, req ReconcileRequest, cp *checkpoint) (*chargeWalk, error) {
	file := req.File != nil
	w := chargeWalk{file: file, book: !file && !run.DryRun && s.Ledger != nil, refunded: map[string]bool{}}
	after, recheck := cp.restore(&w)
	// What disagreed before the run stopped is decided again: a webhook
	// may have settled it since.
	for part := range slices.Chunk(recheck, chargeBatch) {
		if err := s.decide(ctx, &w, part); err != nil {
			return nil, err
		}
	}
	var pages cursorPages
	switch {
	case cp.done():
	case file && req.File.Charges != nil:
		pages = fileCharges(req.File.Charges, after)
	case file: // the file lists no succeeded charge
	default:
		pages = s.listedCharges(ctx, run, after)
	}
	if pages != nil { // a file that lists no succeeded charge has none
		err := pages(func(page []domain.Charge, next string) error {
			for part := range slices.Chunk(page, chargeBatch) {
				if err := s.decide(ctx, &w, part); err != nil {
					return err
				}
			}
			return cp.save(ctx, &w, page, next, !file && next == "")
		})
		if err != nil {
			return nil, err
		}
	}
	if err := cp.walked(ctx, &w); err != nil {
		return nil, err
	}
	if err := s.missingCharges(ctx, run, &w); err != nil {
		return nil, err
	}
	stuck, err := s.stuck(ctx)
	if err != nil {
		return nil, err
	}
	w.found = append(w.found, stuck...)
	return &w, nil
}

// listedCharges is the provider's list of the run's window, a page at a
// time from after ("": the first), as a settlement file's charges are
// handed out. A page that starts where an earlier one did fails the list
// as the provider being unavailable, instead of walking it forever.
func (s *Reconciler) listedCharges(ctx context.Context, run domain.ReconciliationRun, after string) cursorPages {
	return func(yield func([]domain.Charge, string) error) error {
		seen := map[string]bool{}
		for {
			page, err := s.Provider.ListCharges(ctx, run.From, run.To, after)
			if err != nil {
				return fmt.Errorf("list provider charges: %w", err)
			}
			if err := yield(page.Charges, page.Next); err != nil {
				return err
			}
			if page.Next == "" {
				return nil
			}
			if seen[page.Next] {
				return fmt.Errorf("list provider charges: %w: the page after %s goes back to %s", domain.ErrProviderUnavailable, after, page.Next)
			}
			after = page.Next
			seen[after] = true
		}
	}
}

// chargeWalk is what compare carries from one batch of charges to the
// next.
type chargeWalk struct {
	file, book bool
	listed     keySet // the keys of the successful charges seen
	found      []domain.Discrepancy
	// disagreed, kept when the run has a checkpoint (keepDisagreed), are
	// the charges of the page being decided that disagreed (checkpoint.save).
	disagreed     []domain.Charge
	keepDisagreed bool
	matched       int
	refunded      map[string]bool // the window's paid orders with refunds (missingCharges)
}

// decide checks one batch of the provider's charges (checkCharge) and
// books those of payd's attempts (bookCharges, when w.book).
func (s *Reconciler) decide(ctx context.Context, w *chargeWalk, charges []domain.Charge) error {
	succeeded := make([]domain.Charge, 0, len(charges))
	keys := make([]string, 0, len(charges))
	for _, ch := range charges {
		if ch.Status == domain.ChargeSucceeded {
			succeeded = append(succeeded, ch)
			keys = append(keys, ch.IdempotencyKey)
			w.listed.add(ch.IdempotencyKey)
		}
	}
	attempts, err := s.Attempts.FindByIDs(ctx, keys)
	if err != nil {
		return err
	}
	orderIDs := make([]string, 0, len(attempts))
	for _, a := range attempts {
		orderIDs = append(orderIDs, a.OrderID)
	}
	orders, err := s.Orders.FindByIDs(ctx, orderIDs)
	if err != nil {
		return err
	}
	for _, ch := range succeeded {
		d, agrees, err := s.checkCharge(ctx, ch, attempts, orders, w.file)
		if err != nil {
			return err
		}
		if agrees {
			w.matched++
		}
		if d != nil {
			w.found = append(w.found, *d)
			if w.keepDisagreed {
				w.disagreed = append(w.disagreed, ch)
			}
		}
	}
	if !w.book {
		return nil
	}
	return s.bookCharges(ctx, succeeded, attempts)
}

// bookCharges books each successful charge of charges that belongs to an
// attempt of payd's (attempts), as the provider shows it; a charge booked
// already (the usual case) records nothing, and costs no write. A new one
// raises its order's version as it is booked (OrderStore.Lock): it may be
// a second charge carrying an attempt's key (another integration on the
// account made it), which a new order's payment in flight must not take
// for a ledger it knows (ADR 0067).
func (s *Reconciler) bookCharges(ctx context.Context, charges []domain.Charge, attempts map[string]domain.Attempt) error {
	now := s.Now().UTC()
	var entries []domain.LedgerEntry
	var refs []string
	for _, ch := range charges {
		a, ok := attempts[ch.IdempotencyKey]
		if !ok || ch.IdempotencyKey == "" {
			continue // not payd's: a missing_local_payment says so
		}
		if e, ok := seenChargeEntry(a.OrderID, ch, domain.SourceReconciliation, now); ok {
			entries = append(entries, e)
			refs = append(refs, e.Reference)
		}
	}
	booked, err := s.Ledger.Booked(ctx, refs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if booked[e.Reference] {
			continue
		}
		err := s.Tx.InTx(ctx, func(ctx context.Context) error {
			isNew, err := s.Ledger.Append(ctx, e)
			if err != nil || !isNew {
				return err
			}
			_, err = s.Orders.Lock(ctx, e.OrderID)
			return err
		})
		if err != nil {
			return fmt.Errorf("book %s %s: %w", e.Kind, e.Reference, err)
		}
	}
	return nil
}

// checkCharge decides one successful provider charge, given the attempts
// and orders of its batch: a discrepancy, or none. agrees says payd's
// books match it (the order is paid by this very attempt, or the charge
// was given back in full already). A charge whose attempt payd is still
// settling (the order is processing under it) is neither: the reply, the
// webhook or the recoverer will settle it, and if it stays unsettled
// past the lease, stuck reports it once, as stuck_processing, rather than
// also as a missing local payment whose resolution could contradict the
// recovery. A settlement file's line (file) that names another charge or
// order than its attempt's is a missing_provider_charge about that
// attempt: the file does not bear the payment out (lineDisagrees).
func (s *Reconciler) checkCharge(ctx context.Context, ch domain.Charge, attempts map[string]domain.Attempt, orders map[string]domain.Order, file bool) (*domain.Discrepancy, bool, error) {
	d := &domain.Discrepancy{Reference: ch.ID, ChargeID: ch.ID, OrderID: ch.OrderID, ProviderAmount: ch.Amount, Currency: domain.Currency(ch.Currency)}
	a, ok := attempts[ch.IdempotencyKey]
	if !ok || ch.IdempotencyKey == "" {
		d.Type, d.Note = domain.MissingLocalPayment, "the provider charged under a key payd has no attempt for"
		return settledOr(ch, d)
	}
	d.AttemptID, d.OrderID, d.LocalAmount = a.ID, a.OrderID, a.Amount
	if file {
		said, err := s.lineDisagrees(ctx, ch, a)
		if err != nil {
			return nil, false, err
		}
		if said != "" {
			// Its reference is the line's charge, so the order's own
			// missing_provider_charge (referenced by the order) stays apart.
			d.Type, d.Note = domain.MissingProviderCharge, said+": the file does not bear out the payment"
			return d, false, nil
		}
	}
	if !ch.Amount.Equal(a.Amount) || ch.Currency != string(a.Currency) {
		d.Type, d.Note = domain.AmountMismatch, "the provider charged another amount or currency than the attempt"
		return settledOr(ch, d)
	}
	o, ok := orders[a.OrderID]
	if !ok {
		return nil, false, fmt.Errorf("order %s of attempt %s: %w", a.OrderID, a.ID, domain.ErrOrderNotFound)
	}
	settling := !a.Status.Final() && o.ClaimedBy(a)
	// A hold captured at the provider while payd's capture is still
	// settling (its reply lost): the capture's action, sent again under
	// its key, settles it (ADR 0060), as the recoverer settles an attempt.
	capturing := o.Status == domain.StatusAuthorized && o.PayRequestID == a.RequestID && o.HoldAction != ""
	switch {
	case domain.PaidByAttempt(o, a):
		return nil, true, nil
	case settling, capturing:
		return nil, false, nil
	case o.Status == domain.StatusCancelled || o.Status == domain.StatusExpired:
		d.Type, d.Note = domain.PaidAfterClose, "the provider charged an order that was cancelled or expired"
	case o.Status.WasPaid():
		d.Type, d.Note = domain.DuplicateCharge, "a second successful charge for an order paid by another attempt"
	default:
		d.Type, d.Note = domain.MissingLocalPayment, "the provider charged but the order is not paid"
	}
	return settledOr(ch, d)
}

// settledOr drops a finding about a charge the provider has refunded in full
// (the money is back, which is the outcome every resolution aims at) and
// counts that charge as agreeing.
func settledOr(ch domain.Charge, d *domain.Discrepancy) (*domain.Discrepancy, bool, error) {
	if ch.RefundedAmount.GreaterThanOrEqual(ch.Amount) {
		return nil, true, nil
	}
	return d, false, nil
}

// missingCharges finds orders payd counts as paid in the window whose paying
// attempt has no successful charge in the provider's list (w.listed), a page
// of orders and their attempts at a time, and notes on the way those
// with refunds (w.refunded), which the run heals from their ledgers.
func (s *Reconciler) missingCharges(ctx context.Context, run domain.ReconciliationRun, w *chargeWalk) error {
	for after := ""; ; {
		orders, err := s.Orders.ListPaidBetween(ctx, run.From, run.To, after, chargeBatch)
		if err != nil {
			return err
		}
		ids := make([]string, len(orders))
		for i, o := range orders {
			ids[i] = o.ID
		}
		attempts, err := s.Attempts.ListByOrders(ctx, ids)
		if err != nil {
			return err
		}
		for _, o := range orders {
			if o.RefundedAmount.IsPositive() || o.Status == domain.StatusRefunded {
				w.refunded[o.ID] = true
			}
			a := lastOfRequest(attempts[o.ID], o.PayRequestID)
			if a.ID != "" && w.listed.has(a.ID) {
				continue
			}
			w.found = append(w.found, domain.Discrepancy{Type: domain.MissingProviderCharge, Reference: o.ID, OrderID: o.ID, AttemptID: a.ID,
				LocalAmount: o.Amount, Currency: o.Currency, Note: "payd counts the order as paid but the provider lists no successful charge for it"})
		}
		if len(orders) < chargeBatch {
			return nil
		}
		after = orders[len(orders)-1].ID
	}
}

// lastOfRequest is the newest of attempts (oldest first) made under
// requestID, or none.
func lastOfRequest(attempts []domain.Attempt, requestID string) domain.Attempt {
	for i := len(attempts) - 1; i >= 0; i-- {
		if attempts[i].RequestID == requestID {
			return attempts[i]
		}
	}
	return domain.Attempt{}
}

// keySet holds the idempotency keys of the provider's successful charges
// a run has seen: 16 bytes for each of payd's own (UUIDs), the string for
// any other, so that a day of charges costs a run a few megabytes.
type keySet struct {
	ids   map[uuid.UUID]struct{}
	other map[string]struct{}
}

func (k *keySet) add(key string) {
	if id, err := uuid.Parse(key); err == nil && id.String() == key {
		if k.ids == nil {
			k.ids = map[uuid.UUID]struct{}{}
		}
		k.ids[id] = struct{}{}
		return
	}
	if k.other == nil {
		k.other = map[string]struct{}{}
	}
	k.other[strings.Clone(key)] = struct{}{} // not the line or reply it was read from
}

func (k keySet) has(key string) bool {
	if id, err := uuid.Parse(key); err == nil && id.String() == key {
		_, ok := k.ids[id]
		return ok
	}
	_, ok := k.other[key]
	return ok
}

// stuck finds payments whose outcome has been unknown for longer than the lease.
func (s *Reconciler) stuck(ctx context.Context) ([]domain.Discrepancy, error) {
	orders, err := s.Orders.ListStuck(ctx, s.Now().UTC().Add(-s.Lease), 500)
	if err != nil {
		return nil, err
	}
	found := make([]domain.Discrepancy, 0, len(orders))
	for _, o := range orders {
		a, err := s.Attempts.Latest(ctx, o.ID, o.PayRequestID)
		if err != nil && !errors.Is(err, domain.ErrAttemptNotFound) {
			return nil, err
		}
		if a.Status == domain.AttemptHeld {
			continue // not unknown: held, and already an amount_mismatch for an operator
		}
		found = append(found, domain.Discrepancy{Type: domain.StuckProcessing, Reference: o.ID + "/" + o.PayRequestID, OrderID: o.ID, AttemptID: a.ID,
			LocalAmount: o.Amount, Currency: o.Currency, Note: "the payment's outcome has been unknown for longer than the lease"})
	}
	return found, nil
}

// FindRun returns a run with the discrepancies it found.
func (s *Reconciler) FindRun(ctx context.Context, id string) (domain.ReconciliationRun, error) {
	return s.Runs.FindByID(ctx, id)
}
