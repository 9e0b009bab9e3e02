package app

import (
	"github.com/payd/payd/handler"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/provider"
	"github.com/payd/payd/repository"
	"github.com/payd/payd/service"
	"github.com/payd/payd/telemetry"
)

// Compile-time checks that the adapters satisfy the ports service and
// idempotency declare.
var (
	_ service.Transactor       = (*repository.Transactor)(nil)
	_ service.CustomerStore    = (*repository.CustomerStore)(nil)
	_ service.OrderStore       = (*repository.OrderStore)(nil)
	_ service.AttemptStore     = (*repository.AttemptStore)(nil)
	_ idempotency.RecordStore  = (*repository.RecordStore)(nil)
	_ service.RecordPurger     = (*repository.RecordStore)(nil)
	_ service.OrphanRefunder   = (*service.Refunds)(nil)
	_ service.OrderFeed        = (*service.Changes)(nil)
	_ service.Observer         = (*service.Changes)(nil)
	_ service.Observer         = (*telemetry.Metrics)(nil)
	_ service.SettledAnswers   = handler.PayRecords{}
	_ idempotency.Observer     = (*telemetry.Metrics)(nil)
	_ service.InboxStore       = (*repository.InboxStore)(nil)
	_ service.DiscrepancyStore = (*repository.DiscrepancyStore)(nil)
	_ service.RefundStore      = (*repository.RefundStore)(nil)
	_ service.AuditStore       = (*repository.AuditStore)(nil)
	_ service.RunStore         = (*repository.RunStore)(nil)
	_ service.PaymentProvider  = (*provider.Client)(nil)
	_ service.RefundProvider   = (*provider.Client)(nil)
	_ service.ChargeLister     = (*provider.Client)(nil)
	_ service.RefundLister     = (*provider.Client)(nil)
	_ service.OutsideRecorder  = (*service.Refunds)(nil)

	// Telemetry (ADR 22): the timed provider port and the outcome log.
	_ telemetry.Provider = telemetry.ObservedProvider{}
	_ service.Observer   = telemetry.OutcomeLog{}
)
