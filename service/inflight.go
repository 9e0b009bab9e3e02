package service

import (
	"errors"
	"time"

	"github.com/payd/payd/domain"
)

// The in-flight rule (ADR 9): a charge request may reach the provider until
// its deadline, and a margin after it, so until then the provider's "not
// found" proves nothing. The request that sends it holds the attempt's
// lease for that whole window, from the claim on.

// InFlightMargin is how long after a charge request's deadline the provider
// may still act on it: a request it received just before payd gave up and
// finishes anyway, plus clock differences between replicas. A slower
// provider (a longer timeout) gets a longer margin. PAYD_LEASE must be
// longer than the timeout plus this margin.
func InFlightMargin(timeout time.Duration) time.Duration {
	return max(timeout/2, 250*time.Millisecond)
}

// providerTimeout is the deadline of one charge request (PAYD_PROVIDER_TIMEOUT).
func (s *Checkout) providerTimeout() time.Duration {
	if s.ProviderTimeout > 0 {
		return s.ProviderTimeout
	}
	return domain.DefaultProviderTimeout
}

// inFlightUntil is until when a charge request sent at now may reach the
// provider: its deadline plus the margin. Its sender holds the attempt's
// lease that long, and records it on the attempt, so whoever looks later
// (another replica, another configuration) needs no timeout of its own.
func (s *Checkout) inFlightUntil(now time.Time) time.Time {
	t := s.providerTimeout()
	return now.Add(t + InFlightMargin(t))
}

// chargeDeadline is when a charge request that may be in flight until
// inFlightUntil must give up.
func (s *Checkout) chargeDeadline(inFlightUntil time.Time) time.Time {
	return inFlightUntil.Add(-InFlightMargin(s.providerTimeout()))
}

// inFlight reports whether a charge request under attempt a's key may
// still reach the provider at now. An attempt from before this was
// recorded counts from its last update.
func (s *Checkout) inFlight(a domain.Attempt, now time.Time) bool {
	until := a.InFlightUntil
	if until.IsZero() {
		until = s.inFlightUntil(a.UpdatedAt)
	}
	return now.Before(until)
}

// paymentMethodCodes are provider codes that name the payment method as the
// reason a charge request was refused: the caller's input is at fault.
var paymentMethodCodes = map[string]bool{
	"unknown_payment_method": true, "invalid_payment_method": true, "payment_method_invalid": true,
}

// refusal returns the provider's definite refusal of a charge request, or
// nil when err leaves open whether anything was charged. Open are: no
// reply, a timeout, 408, 429 and 5xx (domain.ErrProviderUnavailable); a 409,
// which is how providers (Stripe, the IETF Idempotency-Key draft) say that
// another request with the same key is still being processed; and a
// refusal because the key was used with other parameters, since the key
// then holds a charge. Any other 4xx is a request the provider understood
// and refused without charging.
func refusal(err error) *domain.ProviderRequestError {
	var re *domain.ProviderRequestError
	if err == nil || errors.Is(err, domain.ErrProviderUnavailable) || !errors.As(err, &re) {
		return nil
	}
	if re.StatusCode == 409 || re.Code == "idempotency_key_reused" {
		return nil
	}
	return re
}

// refusalOutcome is what a pay request answers for a refusal: the payment
// method the provider does not know is the caller's error (400); any other
// refusal is a decline carrying the provider's code (402).
func refusalOutcome(code string) error {
	if paymentMethodCodes[code] {
		return domain.ErrPaymentMethodInvalid
	}
	return &domain.DeclineError{Code: code}
}
