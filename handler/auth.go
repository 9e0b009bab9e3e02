package handler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
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

// RequireCustomer admits requests with a valid customer token. The admin
// token is a known caller of the wrong kind: 403, not 401.
func RequireCustomer(auth Authenticator, adminToken string) echo.MiddlewareFunc {
	return requireCustomer(auth, adminTokenMatcher(adminToken))
}

// requireCustomer is RequireCustomer with isAdmin telling admin tokens,
// the shared one and the named operators' alike.
func requireCustomer(auth Authenticator, isAdmin func(string) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			tok := bearer(c)
			if tok == "" {
				return domain.ErrUnauthorized
			}
			cust, err := auth.Authenticate(c.Request().Context(), tok)
			if errors.Is(err, domain.ErrUnauthorized) && isAdmin(tok) {
				return domain.ErrForbidden
			}
			if err != nil {
				return err
			}
			c.Set(ctxCustomer, cust)
			return next(c)
		}
	}
}

// RequireAdmin admits requests carrying the admin token, compared in
// constant time (over hashes, so the length does not leak either). A valid
// customer token is a known caller of the wrong kind: 403; anything else
// is 401.
func RequireAdmin(adminToken string, auth Authenticator) echo.MiddlewareFunc {
	return requireOperator(newOperators(adminToken, nil), auth)
}

// requireOperator admits requests carrying the shared admin token or a
// named operator's, and notes the operator's name for the audit trail. A
// merchant key, like a customer token, is a known caller of the wrong
// kind: 403.
func requireOperator(ops *operators, auth Authenticator, merchants ...*operators) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			tok := bearer(c)
			name := ops.match(tok)
			if name == "" {
				for _, m := range merchants {
					if m.match(tok) != "" {
						return domain.ErrForbidden
					}
				}
				return wrongKind(c, auth, tok)
			}
			c.Set(ctxAdmin, true)
			c.Set(ctxOperator, name)
			return next(c)
		}
	}
}

// adminTokenMatcher reports whether a token is the admin token; an empty
// admin token matches nothing.
func adminTokenMatcher(adminToken string) func(string) bool {
	want := sha256.Sum256([]byte(adminToken))
	return func(tok string) bool {
		got := sha256.Sum256([]byte(tok))
		return adminToken != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
}

// wrongKind is the answer to a token that is not the admin token: 403 when
// it is a customer's, else 401. Any failure to tell (the database down)
// stays 401: the route is refused either way.
func wrongKind(c echo.Context, auth Authenticator, tok string) error {
	if tok == "" || auth == nil {
		return domain.ErrUnauthorized
	}
	if _, err := auth.Authenticate(c.Request().Context(), tok); err == nil {
		return domain.ErrForbidden
	}
	return domain.ErrUnauthorized
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
	if merchantOf(c) != "" { // one scope for every merchant key: a retry after a rotation replays
		return domain.ScopeMerchant
	}
	if id := secretOrderOf(c); id != "" {
		return domain.OrderScope(id)
	}
	return domain.ScopePublic
}
