package handler

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// The merchant's endpoints, as operators manage them (ADR 0053): every
// write is audited; a secret is answered once, at creation or rotation.

// EndpointAdmin is what the endpoint routes need (notify.Admin).
type EndpointAdmin interface {
	Create(ctx context.Context, id, url, description string, events []domain.NotifyType) (domain.Endpoint, error)
	List(ctx context.Context) ([]domain.Endpoint, error)
	Update(ctx context.Context, id string, ch domain.EndpointChange) (domain.Endpoint, error)
	Delete(ctx context.Context, id string) (domain.Endpoint, error)
	Rotate(ctx context.Context, id string) (domain.Endpoint, error)
	Deliveries(ctx context.Context, id string, status domain.DeliveryStatus, limit int) ([]domain.DeliveryLog, error)
	Health(ctx context.Context, ids []string) (map[string]domain.EndpointHealth, error)
	Redeliver(ctx context.Context, eventID string) (int64, error)
}

// Every id the endpoint routes take in a path.
var (
	endpointID    = pathID{"id", domain.ErrEndpointNotFound}
	notifyEventID = pathID{"id", domain.ErrNotifyEventNotFound}
)

// endpointJSON is an endpoint without its secret.
type endpointJSON struct {
	ID                  string   `json:"id"`
	URL                 string   `json:"url"`
	Description         string   `json:"description"`
	Events              []string `json:"events"`
	Status              string   `json:"status"`
	DisabledReason      string   `json:"disabled_reason"`
	FromEnv             bool     `json:"from_env"`
	PreviousSecretUntil *string  `json:"previous_secret_until"` // the old secret signs beside the new until then
	CreatedAt           string   `json:"created_at"`
	UpdatedAt           string   `json:"updated_at"`
}

func toEndpointJSON(e domain.Endpoint) endpointJSON {
	events := make([]string, len(e.Events))
	for i, t := range e.Events {
		events[i] = string(t)
	}
	j := endpointJSON{ID: e.ID, URL: asCalled(e.URL), Description: e.Description, Events: events, Status: string(e.Status),
		DisabledReason: e.DisabledReason, FromEnv: e.FromEnv, CreatedAt: stamp(e.CreatedAt), UpdatedAt: stamp(e.UpdatedAt)}
	if e.PreviousSecret != "" {
		j.PreviousSecretUntil = stampPtr(e.PreviousUntil)
	}
	return j
}

// asCalled is an endpoint's URL as payd calls it: what Go's client sends
// (a space in its path as %20, an upper-case scheme in lower case). A URL
// taken since payd refuses any other (notify.CheckWritten) is the same as
// written; one stored before, or PAYD_NOTIFY_URL, is shown as it is
// called, not as it was typed.
func asCalled(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.String()
}

// endpointSecretJSON is an endpoint with its secret: the answer to a
// creation or a rotation, the only ones that carry it.
type endpointSecretJSON struct {
	endpointJSON
	Secret string `json:"secret"`
}

// endpointHealthJSON is how deliveries to an endpoint go, in the list.
type endpointHealthJSON struct {
	State           string  `json:"state"` // healthy, failing, idle, disabled
	Pending         int64   `json:"pending"`
	OldestPendingAt *string `json:"oldest_pending_at"`
	Failed          int64   `json:"failed"`
	LastAttemptAt   *string `json:"last_attempt_at"`
	LastStatus      int     `json:"last_status"`
	LastError       string  `json:"last_error"`
}

func toEndpointHealthJSON(e domain.Endpoint, h domain.EndpointHealth) endpointHealthJSON {
	state := "healthy"
	switch {
	case e.Status == domain.EndpointDisabled:
		state = "disabled"
	case h.Failing():
		state = "failing"
	case h.LastAttemptAt == nil:
		state = "idle"
	}
	return endpointHealthJSON{State: state, Pending: h.Pending, OldestPendingAt: stampPtr(h.OldestPending), Failed: h.Failed,
		LastAttemptAt: stampPtr(h.LastAttemptAt), LastStatus: h.LastStatus, LastError: h.LastError}
}

// endpointWithHealthJSON is an endpoint in the list: with its health.
type endpointWithHealthJSON struct {
	endpointJSON
	Health endpointHealthJSON `json:"health"`
}

type endpointListJSON struct {
	Data []endpointWithHealthJSON `json:"data"`
}

type createEndpointRequest struct {
	keyField
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
}

type updateEndpointRequest struct {
	keyField
	URL         *string  `json:"url"`
	Events      []string `json:"events"`
	Description *string  `json:"description"`
	Enabled     *bool    `json:"enabled"`
}

func notifyTypes(ss []string) []domain.NotifyType {
	if ss == nil {
		return nil
	}
	out := make([]domain.NotifyType, len(ss))
	for i, s := range ss {
		out[i] = domain.NotifyType(s)
	}
	return out
}

// createEndpoint is POST /v1/admin/endpoints. The stored answer is sealed:
// it carries the secret.
func (h *Admin) createEndpoint(c echo.Context) error {
	var req createEndpointRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	auditInputs(c, map[string]any{"url": auditURL(req.URL), "events": req.Events, "description": req.Description})
	e, err := h.Endpoints.Create(c.Request().Context(), uuid.Must(uuid.NewV7()).String(), req.URL, req.Description, notifyTypes(req.Events))
	if err != nil {
		return err
	}
	auditAbout(c, "", e.ID)
	return writeJSON(c, http.StatusCreated, endpointSecretJSON{endpointJSON: toEndpointJSON(e), Secret: e.Secret})
}

// endpoints is GET /v1/admin/endpoints.
func (h *Admin) endpoints(c echo.Context) error {
	ctx := c.Request().Context()
	list, err := h.Endpoints.List(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, len(list))
	for i, e := range list {
		ids[i] = e.ID
	}
	health, err := h.Endpoints.Health(ctx, ids)
	if err != nil {
		return err
	}
	out := endpointListJSON{Data: make([]endpointWithHealthJSON, len(list))}
	for i, e := range list {
		out.Data[i] = endpointWithHealthJSON{toEndpointJSON(e), toEndpointHealthJSON(e, health[e.ID])}
	}
	return writeJSON(c, http.StatusOK, out)
}

// updateEndpoint is PATCH /v1/admin/endpoints/{id}: what the body names
// changes, the rest stays.
func (h *Admin) updateEndpoint(c echo.Context) error {
	var req updateEndpointRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	in := map[string]any{}
	if req.URL != nil {
		in["url"] = auditURL(*req.URL)
	}
	if req.Events != nil {
		in["events"] = req.Events
	}
	if req.Description != nil {
		in["description"] = *req.Description
	}
	if req.Enabled != nil {
		in["enabled"] = *req.Enabled
	}
	auditInputs(c, in)
	auditAbout(c, "", c.Param("id"))
	e, err := h.Endpoints.Update(c.Request().Context(), c.Param("id"), domain.EndpointChange{URL: req.URL, Description: req.Description,
		Events: notifyTypes(req.Events), Enabled: req.Enabled})
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toEndpointJSON(e))
}

// deleteEndpoint is DELETE /v1/admin/endpoints/{id}: the endpoint and its
// delivery log are gone; the answer is the endpoint as it was.
func (h *Admin) deleteEndpoint(c echo.Context) error {
	auditAbout(c, "", c.Param("id"))
	e, err := h.Endpoints.Delete(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, toEndpointJSON(e))
}

// rotateSecret is POST /v1/admin/endpoints/{id}/rotate-secret.
func (h *Admin) rotateSecret(c echo.Context) error {
	if err := decode(c, &keyField{}); err != nil {
		return err
	}
	auditAbout(c, "", c.Param("id"))
	e, err := h.Endpoints.Rotate(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, endpointSecretJSON{endpointJSON: toEndpointJSON(e), Secret: e.Secret})
}

// deliveryJSON is one delivery in the log, with every attempt.
type deliveryJSON struct {
	ID            string           `json:"id"`
	EventID       string           `json:"event_id"`
	EventType     string           `json:"event_type"`
	OrderID       string           `json:"order_id"`
	Status        string           `json:"status"`
	Attempts      int              `json:"attempts"`
	NextAttemptAt *string          `json:"next_attempt_at"` // pending only
	LastStatus    int              `json:"last_status"`
	LastError     string           `json:"last_error"`
	DeliveredAt   *string          `json:"delivered_at"`
	FailedAt      *string          `json:"failed_at"`
	CreatedAt     string           `json:"created_at"`
	Log           []attemptLogJSON `json:"log"`
}

// attemptLogJSON is one request sent and what came back.
type attemptLogJSON struct {
	N          int    `json:"n"`
	StartedAt  string `json:"started_at"`
	DurationMS int64  `json:"duration_ms"`
	Status     int    `json:"status"`
	Error      string `json:"error"`
	Request    string `json:"request"`
	Response   string `json:"response"`
}

type deliveryListJSON struct {
	Data []deliveryJSON `json:"data"`
}

func toDeliveryJSON(d domain.DeliveryLog) deliveryJSON {
	j := deliveryJSON{ID: d.ID, EventID: d.EventID, EventType: string(d.Type), OrderID: d.OrderID, Status: string(d.Status),
		Attempts: d.Delivery.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, DeliveredAt: stampPtr(d.DeliveredAt),
		FailedAt: stampPtr(d.FailedAt), CreatedAt: stamp(d.CreatedAt), Log: make([]attemptLogJSON, len(d.Attempts))}
	if d.Status == domain.DeliveryPending {
		j.NextAttemptAt = stampPtr(&d.NextAttemptAt)
	}
	for i, a := range d.Attempts {
		j.Log[i] = attemptLogJSON{N: a.N, StartedAt: stamp(a.StartedAt), DurationMS: a.Duration.Milliseconds(), Status: a.Status,
			Error: a.Error, Request: a.RequestHead, Response: a.Response}
	}
	return j
}

// deliveries is GET /v1/admin/endpoints/{id}/deliveries?status=&limit=.
func (h *Admin) deliveries(c echo.Context) error {
	var invalid domain.ValidationErrors
	status := domain.DeliveryStatus(c.QueryParam("status"))
	if status != "" && !status.Valid() {
		invalid = append(invalid, &domain.ValidationError{Field: "status", Reason: "must be pending, delivered or failed"})
	}
	limit := 50
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > domain.MaxPageSize {
			invalid = append(invalid, &domain.ValidationError{Field: "limit", Reason: "must be a whole number from 1 to 100"})
		} else {
			limit = n
		}
	}
	if err := invalid.Err(); err != nil {
		return err
	}
	list, err := h.Endpoints.Deliveries(c.Request().Context(), c.Param("id"), status, limit)
	if err != nil {
		return err
	}
	out := deliveryListJSON{Data: make([]deliveryJSON, len(list))}
	for i, d := range list {
		out.Data[i] = toDeliveryJSON(d)
	}
	return writeJSON(c, http.StatusOK, out)
}

type redeliverJSON struct {
	EventID    string `json:"event_id"`
	Deliveries int64  `json:"deliveries"` // put back to pending
}

// redeliver is POST /v1/admin/events/{id}/redeliver.
func (h *Admin) redeliver(c echo.Context) error {
	if err := decode(c, &keyField{}); err != nil {
		return err
	}
	auditAbout(c, "", c.Param("id"))
	n, err := h.Endpoints.Redeliver(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, redeliverJSON{EventID: c.Param("id"), Deliveries: n})
}

// auditURL is an endpoint URL as the audit log keeps it: without the
// credentials a (refused) URL may carry.
func auditURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return "(an unparsable URL with credentials, withheld)"
		}
		return raw
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	return u.String()
}
