package handler

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// pathID names one id in a route's path and the error a request gets when
// that id cannot name a row.
type pathID struct {
	param    string
	notFound error
}

// Every id payd takes in a path, with the not-found error of its resource.
var (
	orderID       = pathID{"id", domain.ErrOrderNotFound}
	runID         = pathID{"id", domain.ErrRunNotFound}
	discrepancyID = pathID{"did", domain.ErrDiscrepancyNotFound}
)

// validIDs checks the path's ids before any work: an id that is not a
// canonical UUID cannot name a row, so the answer is the resource's 404 —
// the same answer an unknown well-formed id gets, on every database. Text
// no row can have (600 characters, invalid UTF-8) thus never reaches SQL,
// where MariaDB would refuse it with an error and SQLite would not. It
// stands after authentication (a stranger learns nothing) and before the
// idempotency middleware (nothing is stored, the key stays free).
func validIDs(ids ...pathID) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			for _, id := range ids {
				if !domain.ValidID(c.Param(id.param)) {
					return id.notFound
				}
			}
			return next(c)
		}
	}
}

// validRecordPath checks GET /v1/admin/idempotency/{scope}/{key}: a key of
// the wrong format is 400 idempotency_key_invalid, as on
// GET /v1/requests/{key}; a scope that is none of payd's is 404, as no
// record can be stored under it.
func validRecordPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !domain.ValidKey(c.Param("key")) {
			return domain.ErrKeyInvalid
		}
		if !validScope(c.Param("scope")) {
			return domain.ErrRecordNotFound
		}
		return next(c)
	}
}

func validScope(s string) bool {
	switch s {
	case domain.ScopePublic, domain.ScopeAdmin, domain.ScopeProvider:
		return true
	}
	id, ok := strings.CutPrefix(s, domain.CustomerScope(""))
	return ok && domain.ValidID(id)
}
