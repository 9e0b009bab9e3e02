package handler

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// statsJSON is GET /v1/admin/stats's answer: the overview of a window.
type statsJSON struct {
	From              string             `json:"from"`
	To                string             `json:"to"`
	Bucket            string             `json:"bucket"`
	Series            []statsPointJSON   `json:"series"`
	Totals            statsTotalsJSON    `json:"totals"`
	Money             []statsMoneyJSON   `json:"money"`
	OpenDiscrepancies int64              `json:"open_discrepancies"`
	OpenDisputes      int64              `json:"open_disputes"`
	OldestUnknown     *oldestUnknownJSON `json:"oldest_unknown"`
}

type statsPointJSON struct {
	Start    string `json:"start"`
	Paid     int64  `json:"paid"`
	Declined int64  `json:"declined"`
	Unknown  int64  `json:"unknown"`
	Refunds  int64  `json:"refunds"`
}

type statsTotalsJSON struct {
	Paid        int64    `json:"paid"`
	Declined    int64    `json:"declined"`
	Unknown     int64    `json:"unknown"`
	Refunds     int64    `json:"refunds"`
	SuccessRate *float64 `json:"success_rate"` // null when nothing was paid or declined
}

type statsMoneyJSON struct {
	Currency string `json:"currency"`
	Charged  string `json:"charged"`
	Refunded string `json:"refunded"`
}

type oldestUnknownJSON struct {
	OrderID    string `json:"order_id"`
	AttemptID  string `json:"attempt_id"`
	Since      string `json:"since"`
	AgeSeconds int64  `json:"age_seconds"`
}

// stats serves GET /v1/admin/stats?from=&to=&bucket=: every query
// parameter is optional, and all that is wrong with them is answered at
// once (validation_failed).
func (h *Admin) stats(c echo.Context) error {
	var invalid domain.ValidationErrors
	from, err := queryTime(c, "from")
	_ = invalid.Add(err)
	to, err := queryTime(c, "to")
	_ = invalid.Add(err)
	if err := invalid.Err(); err != nil {
		return err
	}
	st, err := h.Service.Stats(c.Request().Context(), from, to, c.QueryParam("bucket"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toStatsJSON(st))
}

func toStatsJSON(st domain.Stats) statsJSON {
	out := statsJSON{
		From: stamp(st.Window.From), To: stamp(st.Window.To), Bucket: string(st.Window.Bucket),
		Series: make([]statsPointJSON, len(st.Series)),
		Totals: statsTotalsJSON{Paid: st.Totals.Paid, Declined: st.Totals.Declined, Unknown: st.Totals.Unknown, Refunds: st.Totals.Refunds},
		Money:  make([]statsMoneyJSON, len(st.Money)), OpenDiscrepancies: st.OpenDiscrepancies, OpenDisputes: st.OpenDisputes,
	}
	for i, p := range st.Series {
		out.Series[i] = statsPointJSON{Start: stamp(p.Start), Paid: p.Paid, Declined: p.Declined, Unknown: p.Unknown, Refunds: p.Refunds}
	}
	if rate, ok := st.Totals.SuccessRate(); ok {
		out.Totals.SuccessRate = &rate
	}
	for i, m := range st.Money {
		out.Money[i] = statsMoneyJSON{Currency: string(m.Currency), Charged: domain.FormatAmount(m.Charged, m.Currency), Refunded: domain.FormatAmount(m.Refunded, m.Currency)}
	}
	if o := st.OldestUnknown; o != nil {
		out.OldestUnknown = &oldestUnknownJSON{OrderID: o.OrderID, AttemptID: o.AttemptID, Since: stamp(o.Since), AgeSeconds: max(0, int64(st.ReadAt.Sub(o.Since).Seconds()))}
	}
	return out
}
