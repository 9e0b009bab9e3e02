package repository

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Job leases (migration 00030): a job whose passes must not overlap across
// replicas takes its row in job_leases for the pass, with a guarded UPDATE
// (the first replica's matches; every other's matches nothing and skips
// the pass), and gives it back after. A pass that dies holding it holds
// it only until leased_until.

var (
	takeLease    = `UPDATE job_leases SET holder = ?, leased_until = ? WHERE name = ? AND (leased_until IS NULL OR leased_until <= ?)`
	releaseLease = `UPDATE job_leases SET holder = NULL, leased_until = NULL WHERE name = ? AND holder = ?`
)

// withLease runs fn holding the lease of job name until now+d, and
// reports whether it ran: false, and no error, when another replica holds
// it.
func (db *DB) withLease(ctx context.Context, name string, now time.Time, d time.Duration, fn func(ctx context.Context) error) (bool, error) {
	token := uuid.NewString()
	taken, err := db.guarded(ctx, act{"take the lease of job", name}, takeLease, token, ts(now.Add(d)), name, ts(now))
	if err != nil || !taken {
		return false, err
	}
	defer db.exec(context.WithoutCancel(ctx), releaseLease, name, token) //nolint:errcheck // a lease not given back ends by itself at leased_until
	return true, fn(ctx)
}
