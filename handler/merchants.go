package handler

import (
	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// The merchant's server is payd's fourth caller, beside buyers (customer
// tokens), operators (admin tokens) and the provider (signed webhooks): it
// alone writes the catalogue, with a merchant key
// (docs/adr/0058-the-merchant-key-and-the-catalogue.md).

// DefaultMerchant is the name of PAYD_MERCHANT_KEY's holder: the audit's
// actor for what is done with it is "merchant:default".
const DefaultMerchant = "default"

// MerchantActor is the audit's actor of the merchant key named name.
func MerchantActor(name string) string { return "merchant:" + name }

// ctxMerchant holds the name of the merchant key a request authenticated
// with.
const ctxMerchant = "payd.merchant"

// Merchant is a named merchant key (PAYD_MERCHANT_KEYS): one per system
// of the merchant's, or one per key while a key is rotated.
type Merchant struct {
	Name string
	Key  string
}

// newMerchants is the keyring of every merchant key: PAYD_MERCHANT_KEY
// (named DefaultMerchant) and the named ones. Like the admin tokens, only
// their hashes are kept and a presented key is compared with all of them
// in constant time (operators.match).
func newMerchants(key string, named []Merchant) *operators {
	k := &operators{}
	if key != "" {
		k.add(DefaultMerchant, key)
	}
	for _, m := range named {
		if m.Key != "" {
			k.add(m.Name, m.Key)
		}
	}
	return k
}

// merchantOf is the name of the merchant key a request authenticated with
// ("" if none).
func merchantOf(c echo.Context) string {
	name, _ := c.Get(ctxMerchant).(string)
	return name
}

// callers tells which kind of caller a bearer token belongs to, for the
// answer to a token of the wrong kind: 403 for a known caller, 401 for
// anyone else.
type callers struct {
	admins    *operators
	merchants *operators
	customers Authenticator
	secrets   ClientSecrets // nil: no client secrets
}

// isAdmin reports whether tok is an admin token, shared or an operator's.
func (k callers) isAdmin(tok string) bool { return k.admins.match(tok) != "" }

// isMerchant reports whether tok is a merchant key.
func (k callers) isMerchant(tok string) bool { return k.merchants.match(tok) != "" }

// orderOfSecret is the order whose client secret tok is, if it is one.
func (k callers) orderOfSecret(tok string) (string, bool) {
	if k.secrets == nil || tok == "" {
		return "", false
	}
	return k.secrets.OrderOfClientSecret(tok)
}

// isSecret reports whether tok is an order's client secret.
func (k callers) isSecret(tok string) bool {
	_, ok := k.orderOfSecret(tok)
	return ok
}

// notCustomer reports whether tok belongs to a caller that is not a
// customer: an operator, the merchant, or an order's client secret.
func (k callers) notCustomer(tok string) bool {
	return k.isAdmin(tok) || k.isMerchant(tok) || k.isSecret(tok)
}

// requireMerchant admits requests carrying a merchant key and notes which
// one for the audit trail, the rate limit and the idempotency scope. A
// customer or admin token is a known caller of the wrong kind: 403;
// anything else is 401.
func requireMerchant(k callers) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			tok := bearer(c)
			name := k.merchants.match(tok)
			if name == "" {
				if tok != "" && (k.isAdmin(tok) || k.isSecret(tok)) {
					return domain.ErrForbidden
				}
				return wrongKind(c, k.customers, tok)
			}
			c.Set(ctxMerchant, name)
			return next(c)
		}
	}
}
