package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Disputes keeps customers' disputes of charges (ADR 0030). payd moves no
// money on a dispute — the customer's bank did — but it books each step
// in the order's ledger: the money withdrawn when the dispute opens, and
// given back (won) or gone for good (lost) when it closes. A dispute opens
// once (its provider ID is unique) and closes once, by domain's dispute
// table; a report that arrives late, twice or before the dispute's opening
// changes nothing twice. The operator still answers the dispute at the
// provider: each new one is recorded as a disputed discrepancy too.
type Disputes struct {
	Tx            Transactor
	Store         DisputeStore
	Ledger        LedgerStore
	Orders        OrderStore
	Attempts      AttemptStore
	Discrepancies DiscrepancyStore
	Audit         AuditStore
	// Charges, optional in tests, is asked which order a disputed charge
	// pays: the report names the charge, the provider's record says whose
	// it is.
	Charges ChargeFinder
	// Finder, optional in tests, is the provider's own record of a
	// dispute: an event's report is booked only as that record shows it
	// (its charge, money and status), never on the event's word.
	Finder   DisputeFinder
	Now      func() time.Time
	Observer Observer
}

// maxDisputeID bounds a provider's dispute ID: its ledger references
// (dispute:<id>:<step>) must fit their column on every database.
const maxDisputeID = 200

// Apply handles a dispute event. Opened, funds withdrawn and updated
// events open the dispute (if new); closed (won or lost) and funds
// reinstated (won) close it, opening it first if its opening was never
// seen.
func (s *Disputes) Apply(ctx context.Context, ev domain.ProviderEvent) (WebhookOutcome, error) {
	pd := domain.ProviderDispute{
		ID: ev.DisputeID, ChargeID: ev.ChargeID, IdempotencyKey: ev.IdempotencyKey, OrderID: ev.OrderID,
		Amount: ev.Amount, Currency: ev.Currency, Status: domain.DisputeOpen, Reason: ev.Reason, CreatedAt: ev.CreatedAt,
	}
	switch ev.Type {
	case domain.EventDisputeClosed:
		pd.Status = ev.DisputeStatus
	case domain.EventDisputeFundsReinstated:
		pd.Status = domain.DisputeWon
	case domain.EventDisputeUpdated:
		if ev.DisputeStatus == domain.DisputeWon || ev.DisputeStatus == domain.DisputeLost {
			pd.Status = ev.DisputeStatus
		}
	}
	if pd.ID == "" {
		pd.ID = ev.ID
	}
	if pd.ID == "" || len(pd.ID) > maxDisputeID || pd.ChargeID == "" || !ev.AmountReadable() || !pd.Status.Valid() {
		return s.unreadable(ctx, ev)
	}
	if pd.ClosedAt.IsZero() && pd.Status != domain.DisputeOpen {
		pd.ClosedAt = ev.CreatedAt
	}
	if s.Finder != nil {
		// The event is a hint: the provider's record of the dispute is
		// what is booked.
		truth, err := s.Finder.FindDispute(ctx, pd.ID)
		switch {
		case errors.Is(err, domain.ErrDisputeNotFound):
			return s.unconfirmed(ctx, ev, pd)
		case err != nil:
			return "", fmt.Errorf("ask the provider about dispute %s: %w", pd.ID, err)
		}
		if truth.ChargeID != pd.ChargeID {
			return s.unconfirmed(ctx, ev, pd)
		}
		pd = truth
	}
	changed, err := s.Sync(ctx, pd, domain.SourceWebhook)
	if err != nil {
		return "", err
	}
	if !changed {
		return OutcomeIgnored, nil
	}
	return OutcomeApplied, nil
}

// Sync makes payd's record of dispute pd follow the provider's: opened if
// new, closed if the provider closed it, each step booked once. It reports
// whether anything changed. A dispute of a charge that pays no order of
// payd's is recorded as a disputed discrepancy only.
//
// The dispute's opening is booked as money withdrawn only once the
// provider's charge shows disputed money (an inquiry, where the bank only
// asks questions, withdraws nothing), or when the dispute is lost; its
// close is booked only if its opening was: money that never left does not
// come back.
func (s *Disputes) Sync(ctx context.Context, pd domain.ProviderDispute, src domain.LedgerSource) (bool, error) {
	orderID, withdrawn, err := s.orderOf(ctx, pd)
	if err != nil {
		return false, err
	}
	cur, cerr := domain.ParseCurrency(pd.Currency)
	if orderID == "" || cerr != nil || !pd.Amount.IsPositive() || len(pd.ID) > maxDisputeID {
		disc, err := s.discrepancy(ctx, pd, orderID, "a dispute payd cannot book (no order of payd's, or unreadable money); answer it at the provider")
		if disc != nil {
			observing(s.Observer).DiscrepancyRecorded(ctx, *disc)
		}
		return disc != nil, err
	}
	now := s.Now().UTC()
	opened := pd.CreatedAt
	if opened.IsZero() {
		opened = now
	}
	var stored domain.Dispute
	var disc, over *domain.Discrepancy
	var isNew, closed, booked bool
	c := sourceCause(ctx, src, pd.ID)
	err = s.Tx.InTx(ctx, func(ctx context.Context) error {
		isNew, closed, booked, disc, over = false, false, false, nil, nil // InTx may run fn again after a conflict: start clean
		var err error
		stored, isNew, err = s.Store.Open(ctx, domain.Dispute{
			ID: newID(), ProviderDisputeID: pd.ID, OrderID: orderID, ChargeID: pd.ChargeID, Status: domain.DisputeOpen,
			Amount: pd.Amount, Currency: cur, Reason: truncate(pd.Reason, 64), OpenedAt: opened.UTC(),
			EvidenceDueBy: evidenceDue(pd), UpdatedAt: now,
		})
		if err != nil {
			return err
		}
		if due := evidenceDue(pd); !isNew && due != nil && (stored.EvidenceDueBy == nil || !stored.EvidenceDueBy.Equal(*due)) {
			// The provider named its date after payd opened the dispute,
			// or moved it: the operators' view follows the provider.
			if _, err := s.Store.SetEvidenceDue(ctx, stored.ID, *due, now); err != nil {
				return err
			}
		}
		if isNew {
			// The operator's to-do, in the dispute's own transaction: a
			// dispute is never open without it.
			if disc, err = s.discrepancy(ctx, pd, orderID, "the customer disputed the payment (reason: "+truncate(pd.Reason, 64)+"); answer it at the provider"); err != nil {
				return err
			}
			if over, err = s.overRemaining(ctx, stored); err != nil {
				return err
			}
		}
		hadOpening, err := s.booked(ctx, stored, domain.LedgerDisputeOpened)
		if err != nil {
			return err
		}
		if !hadOpening && (withdrawn || pd.Status == domain.DisputeLost) {
			if err := s.book(ctx, stored, domain.LedgerDisputeOpened, src, now); err != nil {
				return err
			}
			hadOpening, booked = true, true
		}
		if isNew || booked {
			// The dispute opened, or its money was withdrawn: told with
			// the change (ADR 0053).
			if err := s.Orders.Tell(ctx, orderID, domain.NotifyOrderDisputed, c, now); err != nil {
				return err
			}
		}
		e, ok := domain.CloseEvent(pd.Status)
		if !ok || stored.Status != domain.DisputeOpen {
			return nil
		}
		if closed, err = s.Store.Close(ctx, stored.ID, e, now); err != nil || !closed {
			return err
		}
		if hadOpening {
			if err := s.book(ctx, stored, e.Ledger(), src, now); err != nil {
				return err
			}
		}
		return s.Orders.Tell(ctx, orderID, domain.NotifyOrderDisputeClosed, c, now)
	})
	if err != nil {
		return false, fmt.Errorf("record dispute %s: %w", pd.ID, err)
	}
	for _, d := range []*domain.Discrepancy{disc, over} {
		if d != nil {
			observing(s.Observer).DiscrepancyRecorded(ctx, *d)
		}
	}
	changed := isNew || closed || booked
	if changed {
		observing(s.Observer).OrderChanged(orderID)
	}
	return changed, nil
}

// booked reports whether step k of dispute d is in its order's ledger.
func (s *Disputes) booked(ctx context.Context, d domain.Dispute, k domain.LedgerKind) (bool, error) {
	if s.Ledger == nil {
		return false, nil
	}
	entries, err := s.Ledger.ListByOrder(ctx, d.OrderID)
	if err != nil {
		return false, err
	}
	ref := domain.DisputeReference(d.ProviderDisputeID, k)
	for _, e := range entries {
		if e.Reference == ref {
			return true, nil
		}
	}
	return false, nil
}

// orderOf is the payd order the disputed charge pays — the provider's own
// record of the charge when payd can ask it, else the attempt the report
// names; empty when payd knows no such order — and whether the provider's
// charge shows disputed money withdrawn (true when payd cannot ask).
func (s *Disputes) orderOf(ctx context.Context, pd domain.ProviderDispute) (string, bool, error) {
	orderID, withdrawn := "", true
	if s.Charges != nil {
		ch, err := s.Charges.FindCharge(ctx, pd.ChargeID)
		switch {
		case errors.Is(err, domain.ErrChargeNotFound):
			return "", false, nil
		case err != nil:
			return "", false, fmt.Errorf("ask the provider about charge %s: %w", pd.ChargeID, err)
		}
		orderID, withdrawn = ch.OrderID, ch.DisputedAmount.IsPositive()
	} else if pd.IdempotencyKey != "" {
		a, err := s.Attempts.FindByID(ctx, pd.IdempotencyKey)
		if err == nil {
			orderID = a.OrderID
		} else if !errors.Is(err, domain.ErrAttemptNotFound) {
			return "", false, err
		}
	}
	if orderID == "" {
		return "", false, nil
	}
	if _, err := s.Orders.FindByID(ctx, orderID); err != nil {
		if errors.Is(err, domain.ErrOrderNotFound) {
			return "", false, nil
		}
		return "", false, err
	}
	return orderID, withdrawn, nil
}

// book appends the ledger entry of one step of dispute d, and its audit.
func (s *Disputes) book(ctx context.Context, d domain.Dispute, k domain.LedgerKind, src domain.LedgerSource, now time.Time) error {
	err := appendEntry(ctx, s.Ledger, domain.LedgerEntry{
		ID: newID(), OrderID: d.OrderID, Kind: k, Reference: domain.DisputeReference(d.ProviderDisputeID, k),
		ChargeID: d.ChargeID, Amount: d.Amount, Currency: d.Currency, Source: src, CreatedAt: now,
		Note: "dispute " + truncate(d.ProviderDisputeID, 64),
	})
	if err != nil || s.Audit == nil {
		return err
	}
	detail, err := json.Marshal(map[string]any{
		"dispute_id": truncate(d.ProviderDisputeID, 64), "charge_id": truncate(d.ChargeID, 64),
		"amount": d.Amount.StringFixed(d.Currency.Scale()), "currency": d.Currency, "reason": d.Reason, "learned_from": src,
	})
	if err != nil {
		return err
	}
	return s.Audit.Append(ctx, domain.AuditEntry{
		ID: newID(), Actor: ActorProvider, Action: string(k), OrderID: d.OrderID, Target: truncate(d.ProviderDisputeID, 64),
		Result: 200, Detail: string(detail), CreatedAt: now,
	})
}

// discrepancy records a dispute for an operator, once per dispute; it
// returns the discrepancy when it is new, for the observer to be told
// once the transaction it may run in committed.
func (s *Disputes) discrepancy(ctx context.Context, pd domain.ProviderDispute, orderID, note string) (*domain.Discrepancy, error) {
	if s.Discrepancies == nil {
		return nil, nil
	}
	d := withProviderAmount(domain.Discrepancy{
		Type: domain.Disputed, Reference: pd.ID, OrderID: orderID, AttemptID: pd.IdempotencyKey, ChargeID: pd.ChargeID, Note: note,
	}, pd.Amount.String(), pd.Currency)
	if orderID == "" {
		d.AttemptID = ""
	}
	stored, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(d, s.Now))
	if err != nil || !isNew {
		return nil, err
	}
	return &stored, nil
}

// unconfirmed records a dispute event the provider's own records do not
// bear out (no such dispute, or of another charge): nothing is booked.
func (s *Disputes) unconfirmed(ctx context.Context, ev domain.ProviderEvent, pd domain.ProviderDispute) (WebhookOutcome, error) {
	if s.Discrepancies == nil {
		return OutcomeIgnored, nil
	}
	d := withProviderAmount(domain.Discrepancy{
		Type: domain.Disputed, Reference: "unconfirmed:" + pd.ID, ChargeID: pd.ChargeID,
		Note: "a " + string(ev.Type) + " event the provider's records do not bear out (dispute " + truncate(pd.ID, 64) + "); nothing was booked",
	}, ev.AmountText, ev.Currency)
	stored, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(d, s.Now))
	if err != nil {
		return "", err
	}
	if isNew {
		observing(s.Observer).DiscrepancyRecorded(ctx, stored)
	}
	return OutcomeDiscrepancy, nil
}

// evidenceDue is when the provider wants pd's evidence, nil when it named
// no date.
func evidenceDue(pd domain.ProviderDispute) *time.Time {
	if pd.EvidenceDueBy.IsZero() {
		return nil
	}
	due := pd.EvidenceDueBy.UTC()
	return &due
}

// unreadable records a dispute event payd cannot book.
func (s *Disputes) unreadable(ctx context.Context, ev domain.ProviderEvent) (WebhookOutcome, error) {
	if ev.Type == domain.EventDisputeUpdated || s.Discrepancies == nil {
		return OutcomeIgnored, nil
	}
	pd := domain.ProviderDispute{ID: ev.DisputeID, ChargeID: ev.ChargeID, Currency: ev.Currency}
	if pd.ID == "" {
		pd.ID = ev.ID
	}
	if pd.ID == "" {
		pd.ID = ev.ChargeID
	}
	if pd.ID == "" {
		return OutcomeIgnored, nil
	}
	d := withProviderAmount(domain.Discrepancy{
		Type: domain.Disputed, Reference: pd.ID, ChargeID: pd.ChargeID,
		Note: "a dispute event payd cannot read (" + string(ev.Type) + "); look it up at the provider",
	}, ev.AmountText, ev.Currency)
	stored, isNew, err := s.Discrepancies.Record(ctx, newDiscrepancy(d, s.Now))
	if err != nil {
		return "", err
	}
	if isNew {
		observing(s.Observer).DiscrepancyRecorded(ctx, stored)
	}
	return OutcomeDiscrepancy, nil
}
