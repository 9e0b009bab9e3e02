package handler

import (
	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// An order has three kinds of caller (ADR 0059): its customer (a customer
// token), the holder of its client secret (the buyer's browser, handed the
// secret by the merchant's server), and the merchant's server (a merchant
// key), which may act on every order.

// ClientSecrets derives and checks orders' client secrets
// (service.Tokens).
type ClientSecrets interface {
	ClientSecret(orderID string) string
	OrderOfClientSecret(secret string) (string, bool)
}

// ctxOrderSecret holds the ID of the order whose client secret a request
// authenticated with.
const ctxOrderSecret = "payd.order_secret"

// secretOrderOf is the order whose client secret the request carries
// ("" if none).
func secretOrderOf(c echo.Context) string {
	id, _ := c.Get(ctxOrderSecret).(string)
	return id
}

// actingFor is the customer a request on orders acts for: the customer's
// own ID, or domain.AnyCustomer for the holder of a client secret (bound
// to its order here, at the edge) and for the merchant.
func actingFor(c echo.Context) string {
	if secretOrderOf(c) != "" || merchantOf(c) != "" {
		return domain.AnyCustomer
	}
	return customerOf(c).ID
}

// buyerKey is who a request on orders counts against, for the rate limit
// and the open event streams: the customer, the order of a client secret,
// or the merchant's key.
func buyerKey(c echo.Context) string {
	if id := secretOrderOf(c); id != "" {
		return domain.OrderScope(id)
	}
	if name := merchantOf(c); name != "" {
		return MerchantActor(name)
	}
	return customerOf(c).ID
}

// access is which callers a route on orders admits besides the customer.
type access struct {
	merchant bool // the merchant key
	secret   bool // an order's client secret, for that order only
}

// requireBuyer admits a customer token, and the callers a lets in: a
// merchant key, or an order's client secret. A client secret is good for
// its own order only: on a route of another order it is 404, as another
// customer's order is; on a route it may not use it is a known caller of
// the wrong kind (403), as is a merchant key where a allows none.
func requireBuyer(k callers, a access) echo.MiddlewareFunc {
	customer := requireCustomer(k.customers, k.notCustomer)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		asCustomer := customer(next)
		return func(c echo.Context) error {
			tok := bearer(c)
			if name := k.merchants.match(tok); name != "" {
				if !a.merchant {
					return domain.ErrForbidden
				}
				c.Set(ctxMerchant, name)
				return next(c)
			}
			if id, ok := k.orderOfSecret(tok); ok {
				switch {
				case !a.secret:
					return domain.ErrForbidden
				case c.Param("id") != "" && c.Param("id") != id:
					return domain.ErrOrderNotFound
				}
				c.Set(ctxOrderSecret, id)
				return next(c)
			}
			return asCustomer(c)
		}
	}
}

// errBuyerField is a field of an order's creation only the merchant may
// set.
func errBuyerField(field string) *domain.ValidationError {
	return &domain.ValidationError{Field: field, Reason: "only the merchant's server (a merchant key) may set it"}
}
