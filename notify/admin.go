package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payd/payd/domain"
)

// EndpointStore is what the operators' use cases need of the endpoints
// (repository.EndpointStore).
type EndpointStore interface {
	Create(ctx context.Context, e domain.Endpoint) (domain.Endpoint, error)
	FindByID(ctx context.Context, id string) (domain.Endpoint, error)
	List(ctx context.Context, enabledOnly bool) ([]domain.Endpoint, error)
	Update(ctx context.Context, e domain.Endpoint, now time.Time) (bool, error)
	Rotate(ctx context.Context, id, secret string, until, now time.Time) error
	Delete(ctx context.Context, id string, now time.Time) error
}

// DeliveryLogs is what they need of the deliveries (repository.NotifyStore).
type DeliveryLogs interface {
	ListDeliveries(ctx context.Context, endpointID string, status domain.DeliveryStatus, limit int) ([]domain.DeliveryLog, error)
	EndpointHealth(ctx context.Context, ids []string) (map[string]domain.EndpointHealth, error)
	Redeliver(ctx context.Context, eventID string, now time.Time) (int64, error)
}

// Admin is the operators' use cases of the endpoints: create (the secret
// answered once), list, change, delete, rotate the secret, read the
// delivery log, redeliver an event.
type Admin struct {
	Endpoints EndpointStore
	Log       DeliveryLogs
	Policy    Policy
	Now       func() time.Time
}

// maxDescription bounds an endpoint's description to its column.
const maxDescription = 500

// NewSecret is a fresh whsec_ secret: 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// checkURL refuses an URL the sender would not send to: a validation
// error for a malformed one (with written, also one not written as payd
// calls it: CheckWritten), domain.ErrEndpointURLRefused for an address of
// payd's own network.
func (a *Admin) checkURL(ctx context.Context, u string, written bool) error {
	if len(u) > 2048 {
		return &domain.ValidationError{Field: "url", Reason: "must be at most 2048 characters"}
	}
	if written {
		if err := CheckWritten(u); err != nil {
			return &domain.ValidationError{Field: "url", Reason: err.Error()}
		}
	}
	err := a.Policy.CheckEndpointURL(ctx, u)
	if errors.Is(err, ErrRefusedAddress) {
		return fmt.Errorf("%w: %s", domain.ErrEndpointURLRefused, err)
	}
	if err != nil {
		return &domain.ValidationError{Field: "url", Reason: err.Error()}
	}
	return nil
}

// checkEvents refuses an empty list, an unknown type, a repeat.
func checkEvents(ts []domain.NotifyType) error {
	if len(ts) == 0 {
		return &domain.ValidationError{Field: "events", Reason: "must list at least one event type"}
	}
	for i, t := range ts {
		if !t.Valid() {
			return &domain.ValidationError{Field: "events", Reason: fmt.Sprintf("%q is not an event type (%s)", t, typeNames())}
		}
		if slices.Contains(ts[:i], t) {
			return &domain.ValidationError{Field: "events", Reason: fmt.Sprintf("%q is listed twice", t)}
		}
	}
	return nil
}

func typeNames() string {
	s := make([]string, len(domain.NotifyTypes))
	for i, t := range domain.NotifyTypes {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

func checkDescription(d string) error {
	if len(d) > maxDescription {
		return &domain.ValidationError{Field: "description", Reason: "must be at most 500 characters"}
	}
	return nil
}

// validate collects every invalid field; a refused address is returned
// apart, after the fields are valid.
func (a *Admin) validate(ctx context.Context, url string, events []domain.NotifyType, description string) error {
	var invalid domain.ValidationErrors
	urlErr := a.checkURL(ctx, url, true)
	_ = invalid.Add(urlErr) // a refused address is not a field's error: kept apart
	_ = invalid.Add(checkEvents(events))
	_ = invalid.Add(checkDescription(description))
	if err := invalid.Err(); err != nil {
		return err
	}
	if errors.Is(urlErr, domain.ErrEndpointURLRefused) {
		return urlErr
	}
	return nil
}

// Create stores a new, enabled endpoint with a fresh secret, and returns
// it with that secret: the only time it is answered.
func (a *Admin) Create(ctx context.Context, id, url, description string, events []domain.NotifyType) (domain.Endpoint, error) {
	if err := a.validate(ctx, url, events, description); err != nil {
		return domain.Endpoint{}, err
	}
	now := a.Now().UTC()
	return a.Endpoints.Create(ctx, domain.Endpoint{ID: id, URL: url, Description: description, Events: events,
		Status: domain.EndpointEnabled, Secret: NewSecret(), CreatedAt: now, UpdatedAt: now})
}

// List returns every endpoint.
func (a *Admin) List(ctx context.Context) ([]domain.Endpoint, error) {
	return a.Endpoints.List(ctx, false)
}

// Health is how deliveries go to each of the endpoints ids.
func (a *Admin) Health(ctx context.Context, ids []string) (map[string]domain.EndpointHealth, error) {
	return a.Log.EndpointHealth(ctx, ids)
}

// Find returns one endpoint.
func (a *Admin) Find(ctx context.Context, id string) (domain.Endpoint, error) {
	return a.Endpoints.FindByID(ctx, id)
}

// Update applies ch to endpoint id. Two operators changing one endpoint
// at once do not overwrite each other unseen: each change applies to the
// endpoint as last stored (read again when another got there first).
func (a *Admin) Update(ctx context.Context, id string, ch domain.EndpointChange) (domain.Endpoint, error) {
	var invalid domain.ValidationErrors
	var refused error
	if ch.URL != nil {
		// An endpoint's own URL sent back unchanged is not held to
		// CheckWritten: it may predate the rule.
		stored, err := a.Endpoints.FindByID(ctx, id)
		written := err != nil || stored.URL != *ch.URL
		if err := a.checkURL(ctx, *ch.URL, written); errors.Is(err, domain.ErrEndpointURLRefused) {
			refused = err
		} else {
			_ = invalid.Add(err)
		}
	}
	if ch.Events != nil {
		_ = invalid.Add(checkEvents(ch.Events))
	}
	if ch.Description != nil {
		_ = invalid.Add(checkDescription(*ch.Description))
	}
	if err := invalid.Err(); err != nil {
		return domain.Endpoint{}, err
	}
	if refused != nil {
		return domain.Endpoint{}, refused
	}
	for range 5 {
		e, err := a.Endpoints.FindByID(ctx, id)
		if err != nil {
			return domain.Endpoint{}, err
		}
		if ch.URL != nil {
			e.URL = *ch.URL
		}
		if ch.Description != nil {
			e.Description = *ch.Description
		}
		if ch.Events != nil {
			e.Events = ch.Events
		}
		if ch.Enabled != nil && *ch.Enabled {
			e.Status, e.DisabledReason = domain.EndpointEnabled, ""
		} else if ch.Enabled != nil && e.Status == domain.EndpointEnabled {
			e.Status, e.DisabledReason = domain.EndpointDisabled, "disabled by an operator"
		}
		ok, err := a.Endpoints.Update(ctx, e, a.Now().UTC())
		if err != nil {
			return domain.Endpoint{}, err
		}
		if ok {
			return a.Endpoints.FindByID(ctx, id)
		}
	}
	return domain.Endpoint{}, fmt.Errorf("update endpoint %s: changed by others five times over", id)
}

// Delete removes an endpoint, its pending deliveries failed and its
// delivery log kept, and returns it as it was.
func (a *Admin) Delete(ctx context.Context, id string) (domain.Endpoint, error) {
	e, err := a.Endpoints.FindByID(ctx, id)
	if err != nil {
		return domain.Endpoint{}, err
	}
	return e, a.Endpoints.Delete(ctx, id, a.Now().UTC())
}

// Rotate gives endpoint id a fresh secret and returns the endpoint with
// it (answered once); the old one keeps signing for domain.SecretOverlap.
func (a *Admin) Rotate(ctx context.Context, id string) (domain.Endpoint, error) {
	now := a.Now().UTC()
	if err := a.Endpoints.Rotate(ctx, id, NewSecret(), now.Add(domain.SecretOverlap), now); err != nil {
		return domain.Endpoint{}, err
	}
	return a.Endpoints.FindByID(ctx, id)
}

// Deliveries returns endpoint id's newest deliveries of status (every
// status when empty), with their attempts.
func (a *Admin) Deliveries(ctx context.Context, id string, status domain.DeliveryStatus, limit int) ([]domain.DeliveryLog, error) {
	_, err := a.Endpoints.FindByID(ctx, id)
	if err != nil && !errors.Is(err, domain.ErrEndpointNotFound) {
		return nil, err
	}
	logs, lerr := a.Log.ListDeliveries(ctx, id, status, limit)
	if err != nil && lerr == nil && len(logs) == 0 {
		return nil, err // no such endpoint, and no log left of one deleted
	}
	return logs, lerr
}

// Redeliver sends event id again to every endpoint it was delivered or
// failed to, under the same webhook-id; it returns how many.
func (a *Admin) Redeliver(ctx context.Context, id string) (int64, error) {
	return a.Log.Redeliver(ctx, id, a.Now().UTC())
}
