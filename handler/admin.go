package handler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
	"github.com/payd/payd/service"
)

// AdminService is what the operator routes need.
type AdminService interface {
	Search(ctx context.Context, f domain.OrderFilter) (domain.OrderPage, error)
	Timeline(ctx context.Context, id string) (service.Timeline, error)
	Record(ctx context.Context, e domain.AuditEntry) error
	Discrepancy(ctx context.Context, id string) (domain.Discrepancy, error)
	// Stats is the overview of [from, to) by bucket (zero times and an
	// empty bucket: the defaults).
	Stats(ctx context.Context, from, to time.Time, bucket string) (domain.Stats, error)
	AdminLists
}

// Refunder refunds paid orders.
type Refunder interface {
	Refund(ctx context.Context, req service.RefundRequest) (domain.Refund, domain.Order, error)
}

// ReconcileService runs and reads reconciliations.
type ReconcileService interface {
	Run(ctx context.Context, req service.ReconcileRequest) (domain.ReconciliationRun, error)
	FindRun(ctx context.Context, id string) (domain.ReconciliationRun, error)
}

// DiscrepancyResolver resolves discrepancies.
type DiscrepancyResolver interface {
	Resolve(ctx context.Context, id, action, note string) (domain.Discrepancy, error)
}

// Admin serves the operators' API (ADR 8,
// docs/guarantees.md#operators).
type Admin struct {
	Service   AdminService
	Refunds   Refunder
	Reconcile ReconcileService
	Resolver  DiscrepancyResolver
	Records   RecordLookup
	// Settlements checks an uploaded settlement file (the provider
	// adapter's ParseSettlement); a bad line is a *domain.SettlementError.
	Settlements SettlementParser
	Endpoints   EndpointAdmin // the merchant's endpoints (admin_endpoints.go)
	Links       ProviderLinks // optional: where disputes are answered at the provider
	Log         *slog.Logger  // where a lost audit entry is reported
}

// SettlementParser checks a provider settlement file whole, refusing it
// with a *domain.SettlementError if any line is wrong, and returns the
// succeeded refunds it lists and its succeeded charges, a page at a time.
// open opens the file at its first byte each time it is called: the parser
// reads it once to check it, and the Settlement's Charges read it again
// (ADR 0066).
type SettlementParser func(open func() (io.Reader, error)) (domain.Settlement, error)

func (h *Admin) search(c echo.Context) error {
	var invalid domain.ValidationErrors
	f := orderFilter(c, &invalid)
	f.CustomerID = c.QueryParam("customer")
	f.Attempt = domain.AttemptStatus(c.QueryParam("attempt"))
	var err error
	f.From, err = queryTime(c, "from")
	_ = invalid.Add(err)
	f.To, err = queryTime(c, "to")
	_ = invalid.Add(err)
	if err := invalid.Err(); err != nil {
		return err
	}
	page, err := h.Service.Search(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toSearchPageJSON(page))
}

// searchedOrderJSON is an order in the operators' search: with its newest
// payment attempt, null when it has none, so a declined card shows in the
// list.
type searchedOrderJSON struct {
	orderJSON
	LastAttempt *attemptJSON `json:"last_attempt"`
}

type searchPageJSON struct {
	Data       []searchedOrderJSON `json:"data"`
	NextCursor *string             `json:"next_cursor"`
}

func toSearchPageJSON(p domain.OrderPage) searchPageJSON {
	out := searchPageJSON{Data: make([]searchedOrderJSON, len(p.Orders)), NextCursor: strPtr(p.NextCursor)}
	for i, o := range p.Orders {
		out.Data[i] = searchedOrderJSON{orderJSON: toOrderJSON(o)}
		if a, ok := p.LastAttempts[o.ID]; ok {
			j := toAttemptJSON(a, true)
			out.Data[i].LastAttempt = &j
		}
	}
	return out
}

func queryTime(c echo.Context, name string) (time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, &domain.ValidationError{Field: name, Reason: "must be an RFC 3339 time such as 2026-01-31T00:00:00Z"}
	}
	return t.UTC(), nil
}

func (h *Admin) order(c echo.Context) error {
	t, err := h.Service.Timeline(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toTimelineJSON(t, h.Links))
}

type refundRequest struct {
	keyField
	Amount string `json:"amount,omitempty"`
	Reason string `json:"reason"`
}

func (h *Admin) refund(c echo.Context) error {
	var req refundRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	// What can be checked without the order is checked together; the
	// amount's scale waits for the order's currency (the use case).
	var invalid domain.ValidationErrors
	if req.Amount != "" {
		_, err := domain.ParseDecimal(req.Amount, "amount")
		_ = invalid.Add(err)
	}
	if strings.TrimSpace(req.Reason) == "" || utf8.RuneCountInString(req.Reason) > 500 {
		invalid = append(invalid, &domain.ValidationError{Field: "reason", Reason: "must be 1 to 500 characters"})
	}
	if err := invalid.Err(); err != nil {
		return err
	}
	auditInputs(c, map[string]any{"amount": req.Amount, "reason": req.Reason})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), payTimeout)
	defer cancel()
	r, o, err := h.Refunds.Refund(ctx, service.RefundRequest{OrderID: c.Param("id"), RequestID: requestKeyOf(c), Fingerprint: keyedOf(c).Fingerprint, Amount: req.Amount, Reason: req.Reason})
	if err != nil {
		return oneAnswer(c, err)
	}
	auditAbout(c, o.ID, r.ID)
	return writeJSON(c, http.StatusOK, refundResultJSON{Refund: toRefundJSON(r), Order: toOrderJSON(o)})
}

type reconcileRequest struct {
	keyField
	From   string `json:"from"`
	To     string `json:"to"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// reconcile starts a run against the provider's charge list (JSON body) or
// an uploaded settlement file (multipart form: from, to, dry_run, file).
func (h *Admin) reconcile(c echo.Context) error {
	var req reconcileRequest
	var file *domain.Settlement // nil: ask the provider
	if idempotency.IsMultipart(c) {
		var checked domain.Settlement
		var err error
		if req, checked, err = h.settlementUpload(c); err != nil {
			return err
		}
		file = &checked
	} else if err := decode(c, &req); err != nil {
		return err
	}
	var invalid domain.ValidationErrors
	from, err := time.Parse(time.RFC3339, req.From)
	if err != nil {
		invalid = append(invalid, &domain.ValidationError{Field: "from", Reason: "must be an RFC 3339 time"})
	}
	to, err := time.Parse(time.RFC3339, req.To)
	if err != nil {
		invalid = append(invalid, &domain.ValidationError{Field: "to", Reason: "must be an RFC 3339 time"})
	}
	if err := invalid.Err(); err != nil {
		return err
	}
	auditInputs(c, map[string]any{"from": req.From, "to": req.To, "dry_run": req.DryRun, "settlement_file": file != nil})
	// A run outlives a client that hangs up: it is recorded, then finished.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), time.Minute)
	defer cancel()
	// The run's resume key: this request, retried under its key after it
	// failed or its process died, resumes the run where it stopped; the
	// fingerprint holds it to the same body, its file included (ADR 0068).
	resume := ""
	if key := idempotency.KeyOf(c); key != "" {
		resume = "request\n" + key + "\n" + idempotency.FingerprintOf(c)
	}
	run, err := h.Reconcile.Run(ctx, service.ReconcileRequest{From: from, To: to, DryRun: req.DryRun, File: file, Resume: resume})
	if err != nil {
		// A run only asks the provider (its charges, refunds, disputes)
		// and moves no money: a list that did not answer within
		// PAYD_PROVIDER_TIMEOUT leaves nothing open, and no run is
		// recorded. So it is the provider being unreachable, a 503 with
		// Retry-After as for a webhook (unasked), not a fault in payd.
		return unasked(err)
	}
	auditAbout(c, "", run.ID)
	status := http.StatusCreated
	if run.DryRun {
		status = http.StatusOK
	}
	return writeJSON(c, status, toRunJSON(run))
}

func (h *Admin) run(c echo.Context) error {
	run, err := h.Reconcile.FindRun(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toRunJSON(run))
}

type resolveRequest struct {
	keyField
	Action string `json:"action"`
	Note   string `json:"note"`
}

// resolve is POST /v1/admin/reconciliations/{id}/discrepancies/{did}/resolve:
// the discrepancy as a run reported it (see resolvable).
func (h *Admin) resolve(c echo.Context) error {
	return h.resolveWith(c, func(ctx context.Context) error { return h.resolvable(ctx, c.Param("id"), c.Param("did")) })
}

// resolveDirect is POST /v1/admin/discrepancies/{did}/resolve: the same
// resolution, named by the discrepancy alone, so one found outside any run
// needs no run.
func (h *Admin) resolveDirect(c echo.Context) error {
	return h.resolveWith(c, func(context.Context) error { return nil })
}

// whoami is GET /v1/admin/whoami: the operator the token names, as the
// audit trail records it.
func (h *Admin) whoami(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]string{"operator": firstNonEmpty(operatorOf(c), SharedOperator)})
}

// discrepancy is GET /v1/admin/discrepancies/{did}.
func (h *Admin) discrepancy(c echo.Context) error {
	d, err := h.Service.Discrepancy(c.Request().Context(), c.Param("did"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toDiscrepancyJSON(d))
}

// resolveWith validates a resolution, checks the path with check, then
// resolves the discrepancy the path names.
func (h *Admin) resolveWith(c echo.Context, check func(context.Context) error) error {
	var req resolveRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	var invalid domain.ValidationErrors // both fields at once; the use case checks action again
	if req.Action != service.ResolveApply && req.Action != service.ResolveRefund && req.Action != service.ResolveIgnore {
		invalid = append(invalid, &domain.ValidationError{Field: "action", Reason: "must be apply, refund or ignore"})
	}
	if len(req.Note) > 1000 {
		invalid = append(invalid, &domain.ValidationError{Field: "note", Reason: "must be at most 1000 characters"})
	}
	if err := invalid.Err(); err != nil {
		return err
	}
	auditInputs(c, map[string]any{"action": req.Action, "note": req.Note})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), payTimeout)
	defer cancel()
	if err := check(ctx); err != nil {
		return err
	}
	d, err := h.Resolver.Resolve(ctx, c.Param("did"), req.Action, req.Note)
	if err != nil {
		return oneAnswer(c, err)
	}
	auditAbout(c, d.OrderID, d.ID)
	return writeJSON(c, http.StatusOK, toDiscrepancyJSON(d))
}

// oneAnswer returns err, a refund's or a refund resolution's failure,
// marked final for the request's key when the provider decided it (it
// refused the refund, or reported it for other money): a retry could only
// find that same refund, asked under its own key, so the key keeps this
// one answer, replayed byte for byte (ADR 0043). An unknown outcome
// leaves the key free, and its retry first learns from the provider what
// became of this try's refund; so do payd's own refusals before any
// refund was asked (nothing moved: asked again, payd decides again, as
// for a declined payment) and its faults (500, 503).
func oneAnswer(c echo.Context, err error) error {
	if errors.Is(err, domain.ErrRefundRefused) || errors.Is(err, domain.ErrAmountMismatch) {
		idempotency.Final(c)
	}
	return err
}

// resolvable checks that the path names a real pair: run runID exists and
// found discrepancy did. A discrepancy payd found outside any run (a
// webhook, an automatic refund) belongs to no run's findings once its
// charge is settled, so any run may name it. Anything else is a 404, never
// a resolution of something the operator was not looking at.
func (h *Admin) resolvable(ctx context.Context, runID, did string) error {
	run, err := h.Reconcile.FindRun(ctx, runID)
	if err != nil {
		return err
	}
	for _, d := range run.Discrepancies {
		if d.ID == did {
			return nil
		}
	}
	d, err := h.Service.Discrepancy(ctx, did)
	if err != nil {
		return err
	}
	if d.RunID != "" {
		return domain.ErrDiscrepancyNotFound
	}
	return nil
}

// idempotency shows any caller's record, for support: "what did payd answer
// to this request?". Sealed responses stay sealed.
func (h *Admin) idempotency(c echo.Context) error {
	rec, err := h.Records.Lookup(c.Request().Context(), c.Param("scope"), c.Param("key"))
	if err != nil {
		return err
	}
	out := toRecordJSON(rec)
	return writeJSON(c, http.StatusOK, adminRecordJSON{recordJSON: out, Scope: rec.Scope, LockedUntil: stamp(rec.LockedUntil), Fingerprint: rec.Fingerprint})
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
