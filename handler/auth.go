package handler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

const (
	ctxCustomer = "payd.customer"
	ctxAdmin    = "payd.admin"
)

// Authenticator resolves a customer's bearer token.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (domain.Customer, error)
}

func bearer(c echo.Context) string {
	h := c.Request().Header.Get(echo.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// RequireCustomer admits requests with a valid customer token.
func RequireCustomer(auth Authenticator) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			tok := bearer(c)
			if tok == "" {
				return domain.ErrUnauthorized
			}
			cust, err := auth.Authenticate(c.Request().Context(), tok)
			if err != nil {
				return err
			}
			c.Set(ctxCustomer, cust)
			return next(c)
		}
	}
}

// RequireAdmin admits requests carrying the admin token, compared in
// constant time (over hashes, so the length does not leak either). A
// customer token is not an admin token: 401.
func RequireAdmin(adminToken string) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(adminToken))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			got := sha256.Sum256([]byte(bearer(c)))
			if adminToken == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				return domain.ErrUnauthorized
			}
			c.Set(ctxAdmin, true)
			return next(c)
		}
	}
}

func customerOf(c echo.Context) domain.Customer {
	cust, _ := c.Get(ctxCustomer).(domain.Customer)
	return cust
}

// scopeOf is the idempotency scope of the caller: keys never cross callers.
func scopeOf(c echo.Context) string {
	if cust := customerOf(c); cust.ID != "" {
		return domain.CustomerScope(cust.ID)
	}
	if admin, _ := c.Get(ctxAdmin).(bool); admin {
		return domain.ScopeAdmin
	}
	return domain.ScopePublic
}
