package handler

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// AdminLists are the operators' lists: reconciliation runs, discrepancies
// of every source, and customers.
type AdminLists interface {
	ListRuns(ctx context.Context, f domain.RunFilter) (domain.RunPage, error)
	ListDiscrepancies(ctx context.Context, f domain.DiscrepancyFilter) (domain.DiscrepancyPage, error)
	ListCustomers(ctx context.Context, f domain.CustomerFilter) (domain.CustomerPage, error)
	ListDisputes(ctx context.Context, status domain.DisputeStatus, cursor string, limit int) (service.DisputePage, error)
}

// listQuery reads limit and cursor, the query parameters every list has.
// A limit outside 1..100 is a validation error, as on the order lists; the
// cursor is checked by the use case.
func listQuery(c echo.Context, invalid *domain.ValidationErrors) (cursor string, limit int) {
	limit = 20
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > domain.MaxPageSize {
			*invalid = append(*invalid, &domain.ValidationError{Field: "limit", Reason: "must be a whole number from 1 to 100"})
		} else {
			limit = n
		}
	}
	return c.QueryParam("cursor"), limit
}

type runPageJSON struct {
	Data       []runSummaryJSON `json:"data"`
	NextCursor *string          `json:"next_cursor"`
}

// runSummaryJSON is a run in a list: its counts, not its findings.
type runSummaryJSON struct {
	ID         string  `json:"id"`
	Source     string  `json:"source"`
	From       string  `json:"from"`
	To         string  `json:"to"`
	DryRun     bool    `json:"dry_run"`
	Matched    int     `json:"matched"`
	Found      int     `json:"found"`
	New        int     `json:"new"`
	CreatedAt  string  `json:"created_at"`
	FinishedAt *string `json:"finished_at"`
}

func (h *Admin) runs(c echo.Context) error {
	var invalid domain.ValidationErrors
	var f domain.RunFilter
	f.Cursor, f.Limit = listQuery(c, &invalid)
	if err := invalid.Err(); err != nil {
		return err
	}
	page, err := h.Service.ListRuns(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := runPageJSON{Data: make([]runSummaryJSON, len(page.Runs)), NextCursor: strPtr(page.NextCursor)}
	for i, r := range page.Runs {
		out.Data[i] = toRunSummaryJSON(r)
	}
	return writeJSON(c, http.StatusOK, out)
}

type discrepancyPageJSON struct {
	Data       []discrepancyJSON `json:"data"`
	NextCursor *string           `json:"next_cursor"`
}

func (h *Admin) discrepancies(c echo.Context) error {
	var invalid domain.ValidationErrors
	f := domain.DiscrepancyFilter{Status: domain.DiscrepancyStatus(c.QueryParam("status")), Type: domain.DiscrepancyType(c.QueryParam("type")), OrderID: c.QueryParam("order")}
	f.Cursor, f.Limit = listQuery(c, &invalid)
	if err := invalid.Err(); err != nil {
		return err
	}
	page, err := h.Service.ListDiscrepancies(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := discrepancyPageJSON{Data: make([]discrepancyJSON, len(page.Discrepancies)), NextCursor: strPtr(page.NextCursor)}
	for i, d := range page.Discrepancies {
		out.Data[i] = toDiscrepancyJSON(d)
	}
	return writeJSON(c, http.StatusOK, out)
}

// listedDisputeJSON is a dispute in the operators' list: with its order.
type listedDisputeJSON struct {
	disputeJSON
	OrderID string `json:"order_id"`
}

type disputePageJSON struct {
	Data       []listedDisputeJSON `json:"data"`
	NextCursor *string             `json:"next_cursor"`
}

// disputes is GET /v1/admin/disputes: every order's disputes, newest
// first, by status (open: the ones to answer at the provider).
func (h *Admin) disputes(c echo.Context) error {
	var invalid domain.ValidationErrors
	cursor, limit := listQuery(c, &invalid)
	if err := invalid.Err(); err != nil {
		return err
	}
	page, err := h.Service.ListDisputes(c.Request().Context(), domain.DisputeStatus(c.QueryParam("status")), cursor, limit)
	if err != nil {
		return err
	}
	out := disputePageJSON{Data: make([]listedDisputeJSON, len(page.Disputes)), NextCursor: strPtr(page.NextCursor)}
	for i, d := range page.Disputes {
		out.Data[i] = listedDisputeJSON{toDisputeJSON(d, h.Links), d.OrderID}
	}
	return writeJSON(c, http.StatusOK, out)
}

type customerPageJSON struct {
	Data       []customerJSON `json:"data"`
	NextCursor *string        `json:"next_cursor"`
}

func (h *Admin) customers(c echo.Context) error {
	var invalid domain.ValidationErrors
	f := domain.CustomerFilter{Email: c.QueryParam("email")}
	f.Cursor, f.Limit = listQuery(c, &invalid)
	if err := invalid.Err(); err != nil {
		return err
	}
	page, err := h.Service.ListCustomers(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := customerPageJSON{Data: make([]customerJSON, len(page.Customers)), NextCursor: strPtr(page.NextCursor)}
	for i, cu := range page.Customers {
		out.Data[i] = customerJSON{ID: cu.ID, Email: cu.Email, Name: cu.Name, CreatedAt: stamp(cu.CreatedAt)}
	}
	return writeJSON(c, http.StatusOK, out)
}
