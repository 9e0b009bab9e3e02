package main

import (
	"context"
	"errors"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/handler"
	"github.com/payd/payd/repository"
)

// Backlog gauges are read from the database at most once per backlogTTL per
// replica, each read bounded by backlogTimeout (ADR 0022).
const (
	backlogTTL     = 15 * time.Second
	backlogTimeout = 2 * time.Second
)

// observedProvider is the provider port with a stopwatch: every call is
// timed into payd_provider_request_duration_seconds by operation and
// outcome. It wraps the port in the wiring, so neither service nor
// provider knows about Prometheus.
type observedProvider struct {
	next    paymentProvider
	observe func(operation, outcome string, d time.Duration)
}

// Charge times a charge; a decline is the outcome "declined".
func (p observedProvider) Charge(ctx context.Context, req domain.ChargeRequest) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.next.Charge(ctx, req)
	outcome := providerOutcome(err)
	if err == nil && ch.Status == domain.ChargeFailed {
		outcome = "declined"
	}
	p.observe("charge", outcome, time.Since(start))
	return ch, err
}

// GetCharge times a lookup of an attempt's charge.
func (p observedProvider) GetCharge(ctx context.Context, a domain.Attempt) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.next.GetCharge(ctx, a)
	p.observe("lookup", providerOutcome(err), time.Since(start))
	return ch, err
}

// Refund times a refund.
func (p observedProvider) Refund(ctx context.Context, req domain.ProviderRefundRequest) (domain.ProviderRefund, error) {
	start := time.Now()
	r, err := p.next.Refund(ctx, req)
	p.observe("refund", providerOutcome(err), time.Since(start))
	return r, err
}

// ListCharges times the listing a reconciliation run asks for.
func (p observedProvider) ListCharges(ctx context.Context, from, to time.Time) ([]domain.Charge, error) {
	start := time.Now()
	cs, err := p.next.ListCharges(ctx, from, to)
	p.observe("list_charges", providerOutcome(err), time.Since(start))
	return cs, err
}

// FindCharge times a lookup of a charge by the provider's ID.
func (p observedProvider) FindCharge(ctx context.Context, chargeID string) (domain.Charge, error) {
	start := time.Now()
	ch, err := p.next.FindCharge(ctx, chargeID)
	p.observe("find_charge", providerOutcome(err), time.Since(start))
	return ch, err
}

// ListRefunds times the refund listing a reconciliation run asks for.
func (p observedProvider) ListRefunds(ctx context.Context, from, to time.Time) ([]domain.ProviderRefund, error) {
	start := time.Now()
	rs, err := p.next.ListRefunds(ctx, from, to)
	p.observe("list_refunds", providerOutcome(err), time.Since(start))
	return rs, err
}

// ListDisputes times the dispute listing a reconciliation run asks for.
func (p observedProvider) ListDisputes(ctx context.Context, from, to time.Time) ([]domain.ProviderDispute, error) {
	start := time.Now()
	ds, err := p.next.ListDisputes(ctx, from, to)
	p.observe("list_disputes", providerOutcome(err), time.Since(start))
	return ds, err
}

// FindDispute times a lookup of a dispute by the provider's ID.
func (p observedProvider) FindDispute(ctx context.Context, id string) (domain.ProviderDispute, error) {
	start := time.Now()
	d, err := p.next.FindDispute(ctx, id)
	p.observe("find_dispute", providerOutcome(err), time.Since(start))
	return d, err
}

// providerOutcome sorts a provider call's error into the outcome label's
// fixed set (handler.ProviderOutcomes).
func providerOutcome(err error) string {
	var refused *domain.ProviderRequestError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, domain.ErrChargeNotFound):
		return "not_found"
	case errors.As(err, &refused):
		return "refused"
	case errors.Is(err, domain.ErrProviderUnavailable):
		return "unavailable"
	}
	return "error"
}

// readBacklog is the backlog gauges' database read.
func readBacklog(db *repository.DB) func(context.Context) (handler.Backlog, error) {
	return func(ctx context.Context) (handler.Backlog, error) {
		b, err := repository.ReadBacklog(ctx, db)
		return handler.Backlog(b), err
	}
}
