package main

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/payd/payd/app"
)

// The tracing, metrics listener and observed provider of signals.go,
// tracing.go and metrics_listener.go now live in app, which wires them;
// these names keep the files they came from compiling until they move to
// the telemetry package.
type (
	config struct {
		app.Config
		tracerProvider trace.TracerProvider
	}
	paymentProvider = app.PaymentProvider
)
