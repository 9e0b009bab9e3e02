// Package provider is payd's anti-corruption layer towards the payment
// provider: an HTTP client for the provider API and the parsers of its
// webhook events and settlement files. Each translates the provider's wire
// format into payd's own vocabulary (domain.Charge, domain.ProviderEvent,
// ...) once; no wire type escapes this package. The ports payd calls it
// through are declared by their consumer, in service.
package provider
