// Package domain owns payd's vocabulary and rules: customers, orders and
// their state machine, money, payment attempts and their state machine,
// idempotency records, the payment vocabulary payd shares with its provider
// (charges, provider refunds and events, the provider's errors), and the
// errors callers match on. It depends only on the standard library,
// uuid and decimal; every other package speaks to the others in these terms.
package domain
