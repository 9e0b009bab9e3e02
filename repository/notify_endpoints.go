package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/payd/payd/domain"
)

// Sealer seals what must not rest in the database as plaintext (an
// endpoint's signing secrets) and opens it again: payd's response sealer,
// keyed by PAYD_SECRET_KEY (idempotency.Sealer).
type Sealer interface {
	Seal(plaintext []byte) ([]byte, error)
	Open(sealed []byte) ([]byte, error)
}

// endpointRow is a row of notify_endpoints. events is the subscribed types,
// space-separated; the secrets are sealed.
type endpointRow struct {
	ID                   string   `gorm:"column:id"`
	URL                  string   `gorm:"column:url"`
	Description          string   `gorm:"column:description"`
	Events               string   `gorm:"column:events"`
	Status               string   `gorm:"column:status"`
	DisabledReason       string   `gorm:"column:disabled_reason"`
	SecretSealed         []byte   `gorm:"column:secret_sealed"`
	PreviousSecretSealed []byte   `gorm:"column:previous_secret_sealed"`
	PreviousUntil        *utcTime `gorm:"column:previous_until"`
	FromEnv              bool     `gorm:"column:from_env"`
	CreatedAt            utcTime  `gorm:"column:created_at"`
	UpdatedAt            utcTime  `gorm:"column:updated_at"`
}

// TableName tells GORM the table.
func (endpointRow) TableName() string { return "notify_endpoints" }

// EndpointStore keeps the merchant's endpoints (docs/adr/0053).
type EndpointStore struct {
	db     *DB
	sealer Sealer
}

// NewEndpointStore returns an EndpointStore on db that seals secrets with
// sealer.
func NewEndpointStore(db *DB, sealer Sealer) *EndpointStore {
	return &EndpointStore{db: db, sealer: sealer}
}

func joinTypes(ts []domain.NotifyType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, " ")
}

func splitTypes(s string) []domain.NotifyType {
	var out []domain.NotifyType
	for _, f := range strings.Fields(s) {
		out = append(out, domain.NotifyType(f))
	}
	return out
}

func (s *EndpointStore) fromDomain(e domain.Endpoint) (endpointRow, error) {
	for _, t := range e.Events {
		if !t.Valid() {
			return endpointRow{}, fmt.Errorf("event type %q is not valid", t)
		}
	}
	if e.Status == "" {
		e.Status = domain.EndpointEnabled
	}
	if !e.Status.Valid() {
		return endpointRow{}, fmt.Errorf("endpoint status %q is not valid", e.Status)
	}
	sealed, err := s.sealer.Seal([]byte(e.Secret))
	if err != nil {
		return endpointRow{}, fmt.Errorf("seal secret: %w", err)
	}
	row := endpointRow{ID: e.ID, URL: e.URL, Description: e.Description, Events: joinTypes(e.Events),
		Status: string(e.Status), DisabledReason: e.DisabledReason, SecretSealed: sealed, FromEnv: e.FromEnv,
		CreatedAt: ts(e.CreatedAt), UpdatedAt: ts(e.UpdatedAt), PreviousUntil: tsPtr(e.PreviousUntil)}
	if e.PreviousSecret != "" {
		retired := append([]domain.RetiredSecret{{Secret: e.PreviousSecret, Until: derefTime(e.PreviousUntil)}}, e.Older...)
		if row.PreviousSecretSealed, err = s.sealRetired(retired); err != nil {
			return endpointRow{}, err
		}
	}
	return row, nil
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// retiredSecret is one element of previous_secret_sealed's sealed list.
type retiredSecret struct {
	Secret string    `json:"secret"`
	Until  time.Time `json:"until"`
}

// sealRetired seals the secrets rotated away, newest first, as one JSON
// list in previous_secret_sealed.
func (s *EndpointStore) sealRetired(rs []domain.RetiredSecret) ([]byte, error) {
	list := make([]retiredSecret, len(rs))
	for i, r := range rs {
		list[i] = retiredSecret{Secret: r.Secret, Until: r.Until.UTC()}
	}
	plain, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	sealed, err := s.sealer.Seal(plain)
	if err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	return sealed, nil
}

// openRetired reads previous_secret_sealed: a sealed JSON list, or (as
// stored before there could be more than one) a single secret signing
// until previous_until.
func (s *EndpointStore) openRetired(sealed []byte, until *utcTime) ([]domain.RetiredSecret, error) {
	plain, err := s.sealer.Open(sealed)
	if err != nil {
		return nil, err
	}
	if len(plain) == 0 || plain[0] != '[' {
		var u time.Time
		if until != nil {
			u = until.time()
		}
		return []domain.RetiredSecret{{Secret: string(plain), Until: u}}, nil
	}
	var list []retiredSecret
	if err := json.Unmarshal(plain, &list); err != nil {
		return nil, err
	}
	out := make([]domain.RetiredSecret, len(list))
	for i, r := range list {
		out[i] = domain.RetiredSecret{Secret: r.Secret, Until: r.Until}
	}
	return out, nil
}

func (s *EndpointStore) toDomain(r endpointRow) (domain.Endpoint, error) {
	secret, err := s.sealer.Open(r.SecretSealed)
	if err != nil {
		return domain.Endpoint{}, fmt.Errorf("endpoint %s secret: %w", r.ID, err)
	}
	e := domain.Endpoint{ID: r.ID, URL: r.URL, Description: r.Description, Events: splitTypes(r.Events),
		Status: domain.EndpointStatus(r.Status), DisabledReason: r.DisabledReason, Secret: string(secret),
		PreviousUntil: timePtr(r.PreviousUntil), FromEnv: r.FromEnv, CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time()}
	if len(r.PreviousSecretSealed) > 0 {
		retired, err := s.openRetired(r.PreviousSecretSealed, r.PreviousUntil)
		if err != nil {
			return domain.Endpoint{}, fmt.Errorf("endpoint %s previous secret: %w", r.ID, err)
		}
		if len(retired) > 0 {
			until := retired[0].Until
			e.PreviousSecret, e.PreviousUntil, e.Older = retired[0].Secret, &until, retired[1:]
		}
	}
	return e, nil
}

// Create stores a new endpoint, its secret sealed.
func (s *EndpointStore) Create(ctx context.Context, e domain.Endpoint) (domain.Endpoint, error) {
	row, err := s.fromDomain(e)
	if err == nil {
		err = s.db.create(ctx, &row)
	}
	if err != nil {
		return domain.Endpoint{}, fmt.Errorf("create endpoint: %w", err)
	}
	return s.toDomain(row)
}

// FindByID returns one endpoint, or domain.ErrEndpointNotFound.
func (s *EndpointStore) FindByID(ctx context.Context, id string) (domain.Endpoint, error) {
	var row endpointRow
	if err := s.db.conn(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return domain.Endpoint{}, fmt.Errorf("find endpoint %s: %w", id, notFound(err, domain.ErrEndpointNotFound))
	}
	return s.toDomain(row)
}

// List returns every endpoint, oldest first; enabledOnly keeps the enabled.
func (s *EndpointStore) List(ctx context.Context, enabledOnly bool) ([]domain.Endpoint, error) {
	var rows []endpointRow
	q := s.db.conn(ctx)
	if enabledOnly {
		q = q.Where("status = ?", string(domain.EndpointEnabled))
	}
	if err := q.Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	out := make([]domain.Endpoint, 0, len(rows))
	for _, r := range rows {
		e, err := s.toDomain(r)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// updateEndpoint is Update's: the fields an operator may change, on a row
// still at the updated_at the caller read (two operators' edits cannot
// silently overwrite each other).
const updateEndpoint = `UPDATE notify_endpoints SET url = ?, description = ?, events = ?, status = ?, disabled_reason = ?, updated_at = ?
	WHERE id = ? AND updated_at = ?`

// Update writes e's URL, description, events and status over the stored
// row, which must still be as read at e.UpdatedAt; it reports false when
// it was changed since (or is gone).
func (s *EndpointStore) Update(ctx context.Context, e domain.Endpoint, now time.Time) (bool, error) {
	for _, t := range e.Events {
		if !t.Valid() {
			return false, fmt.Errorf("event type %q is not valid", t)
		}
	}
	if !e.Status.Valid() {
		return false, fmt.Errorf("endpoint status %q is not valid", e.Status)
	}
	return s.db.guarded(ctx, act{"update endpoint", e.ID}, updateEndpoint, e.URL, e.Description, joinTypes(e.Events),
		string(e.Status), e.DisabledReason, ts(now), e.ID, ts(e.UpdatedAt))
}

// rotateEndpoint is Rotate's: the new secret, and the secrets rotated
// away (the current one first, then those still in their overlap), on a
// row whose secret is still the one read (two rotations at once cannot
// drop each other's).
const rotateEndpoint = `UPDATE notify_endpoints SET previous_secret_sealed = ?, previous_until = ?, secret_sealed = ?, updated_at = ?
	WHERE id = ? AND secret_sealed = ?`

// Rotate gives endpoint id the new secret; the current one keeps signing
// until until, and every one rotated away before it until its own end.
// It returns domain.ErrEndpointNotFound for no such endpoint.
func (s *EndpointStore) Rotate(ctx context.Context, id, secret string, until, now time.Time) error {
	sealed, err := s.sealer.Seal([]byte(secret))
	if err != nil {
		return fmt.Errorf("seal secret: %w", err)
	}
	for range 5 {
		var row endpointRow
		if err := s.db.conn(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
			return fmt.Errorf("rotate endpoint %s: %w", id, notFound(err, domain.ErrEndpointNotFound))
		}
		e, err := s.toDomain(row)
		if err != nil {
			return err
		}
		retired := append([]domain.RetiredSecret{{Secret: e.Secret, Until: until}}, e.Retired(now)...)
		prev, err := s.sealRetired(retired)
		if err != nil {
			return err
		}
		ok, err := s.db.guarded(ctx, act{"rotate endpoint", id}, rotateEndpoint, prev, ts(until), sealed, ts(now), id, row.SecretSealed)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("rotate endpoint %s: rotated by another at the same time; try again", id)
}

// Delete removes endpoint id. Its deliveries and their attempts stay, in
// the delivery log: those still pending are failed, "endpoint deleted",
// so every event stays delivered, pending or visibly failed.
func (s *EndpointStore) Delete(ctx context.Context, id string, now time.Time) error {
	return s.db.inTx(ctx, func(ctx context.Context) error {
		if _, err := s.db.exec(ctx, giveUpEndpointPending, ts(now), ts(now), "endpoint deleted", id); err != nil {
			return fmt.Errorf("delete endpoint %s: fail its pending deliveries: %w", id, err)
		}
		n, err := s.db.exec(ctx, `DELETE FROM notify_endpoints WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete endpoint %s: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("delete endpoint %s: %w", id, domain.ErrEndpointNotFound)
		}
		return nil
	})
}

// The 410 path's statements: the endpoint disabled with its reason, and
// its pending deliveries given up, in one transaction.
var (
	disableEndpoint       = `UPDATE notify_endpoints SET status = ` + sqlStatus(domain.EndpointDisabled) + `, disabled_reason = ?, updated_at = ? WHERE id = ?`
	giveUpEndpointPending = `UPDATE notify_deliveries SET status = ` + deliveryGiveUp.to + `, leased_until = NULL, failed_at = ?, updated_at = ?, last_error = ?
		WHERE endpoint_id = ? AND status IN ` + deliveryGiveUp.from
)

// Gone disables endpoint id with reason (its own 410 Gone) and fails its
// pending deliveries, for operators to see; it returns how many it failed.
func (s *EndpointStore) Gone(ctx context.Context, id, reason string, now time.Time) (int64, error) {
	var failed int64
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		if _, err := s.db.exec(ctx, disableEndpoint, reason, ts(now), id); err != nil {
			return fmt.Errorf("disable endpoint %s: %w", id, err)
		}
		n, err := s.db.exec(ctx, giveUpEndpointPending, ts(now), ts(now), truncate(reason, 500), id)
		if err != nil {
			return fmt.Errorf("fail deliveries of endpoint %s: %w", id, err)
		}
		failed = n
		return nil
	})
	return failed, err
}

// updateEnvEndpoint is UpsertFromEnv's update of the stored endpoint, on
// a row still as it read it: URL, types and secrets; never its status.
const updateEnvEndpoint = `UPDATE notify_endpoints SET url = ?, events = ?, secret_sealed = ?, previous_secret_sealed = ?, previous_until = ?,
	updated_at = ? WHERE id = ? AND from_env = 1 AND updated_at = ?`

// UpsertFromEnv makes e (from_env, its ID fixed by the caller) the
// endpoint configured from the environment, or creates it (enabled).
// A stored one takes e's URL and types; a secret changed in the
// environment rotates as rotate-secret does (the stored secret keeps
// signing beside the new for domain.SecretOverlap). Its status is
// left as it is: an endpoint its own 410 or an operator disabled stays
// disabled, and the caller tells the operator so. Replicas starting
// together all name the same ID: one creates it, and each update is
// guarded on the row as read, so a second replica finds the rotation
// done rather than rotating the new secret over itself.
func (s *EndpointStore) UpsertFromEnv(ctx context.Context, e domain.Endpoint, now time.Time) (domain.Endpoint, error) {
	e.FromEnv, e.Status = true, domain.EndpointEnabled
	for range 4 {
		stored, err := s.FindByID(ctx, e.ID)
		if errors.Is(err, domain.ErrEndpointNotFound) {
			created, err := s.Create(ctx, e)
			if err == nil {
				return created, nil
			}
			if !isUniqueViolation(err) {
				return domain.Endpoint{}, err
			}
			continue
		}
		if err != nil {
			return domain.Endpoint{}, err
		}
		if !stored.FromEnv {
			return domain.Endpoint{}, fmt.Errorf("endpoint %s from the environment: %w", e.ID, errors.New("an endpoint of that ID was made through the API"))
		}
		next := stored
		next.URL, next.Events = e.URL, e.Events
		if e.Secret != stored.Secret {
			until := now.Add(domain.SecretOverlap)
			next.Secret, next.PreviousSecret, next.PreviousUntil, next.Older = e.Secret, stored.Secret, &until, stored.Retired(now)
		}
		if next.URL == stored.URL && joinTypes(next.Events) == joinTypes(stored.Events) && next.Secret == stored.Secret {
			return stored, nil
		}
		row, err := s.fromDomain(next)
		if err != nil {
			return domain.Endpoint{}, err
		}
		ok, err := s.db.guarded(ctx, act{"update endpoint", e.ID}, updateEnvEndpoint, row.URL, row.Events, row.SecretSealed,
			row.PreviousSecretSealed, row.PreviousUntil, ts(now), e.ID, ts(stored.UpdatedAt))
		if err != nil {
			return domain.Endpoint{}, err
		}
		if ok {
			return s.FindByID(ctx, e.ID)
		}
	}
	return domain.Endpoint{}, fmt.Errorf("endpoint %s from the environment: changed under every attempt to store it", e.ID)
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
