package handler

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// RecordLookup finds idempotency records.
type RecordLookup interface {
	Lookup(ctx context.Context, scope, key string) (domain.Record, error)
}

// Requests lets a caller find out what became of a request by its key, e.g.
// a checkout page reloaded in the middle of a payment.
type Requests struct {
	Records RecordLookup
}

// get answers GET /v1/requests/{key}, within the caller's own scope only.
func (h *Requests) get(c echo.Context) error {
	key := c.Param("key")
	if !domain.ValidKey(key) {
		return domain.ErrKeyInvalid
	}
	rec, err := h.Records.Lookup(c.Request().Context(), scopeOf(c), key)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toRecordJSON(rec))
}
