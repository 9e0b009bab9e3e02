package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/payd/payd/migrations"
)

// The secret key's check value (migration 00017, ADR 0042): one row that
// says which PAYD_SECRET_KEY the database's sealed answers and customer
// tokens were made with, as an HMAC of the key, never the key itself.

var (
	// Whoever comes first records its value; the others' inserts match
	// the row already there and change nothing, so replicas starting
	// together on a new database end with one value, read back by all.
	recordSecretCheck = map[migrations.Dialect]string{
		migrations.MySQL:  "INSERT INTO secret_key_check (id, check_value) VALUES (1, ?) ON DUPLICATE KEY UPDATE id = id",
		migrations.SQLite: "INSERT INTO secret_key_check (id, check_value) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
	}
	readSecretCheck = "SELECT check_value FROM secret_key_check WHERE id = 1"
)

// RecordSecretCheck records value as db's secret key check unless one is
// recorded already, and returns the one recorded: value if this call (or
// another replica with the same key) was first, else the value recorded
// before, which the caller compares with its own.
func RecordSecretCheck(ctx context.Context, db *DB, value string) (string, error) {
	if _, err := db.exec(ctx, recordSecretCheck[db.dialect], value); err != nil {
		return "", fmt.Errorf("record the secret key check: %w", err)
	}
	var stored string
	if err := db.queryRow(ctx, readSecretCheck).Scan(&stored); err != nil {
		return "", fmt.Errorf("read the secret key check: %w", err)
	}
	return stored, nil
}

// SecretCheck is db's recorded secret key check, "" when none is recorded
// yet (a new database, or one made before the check existed).
func SecretCheck(ctx context.Context, db *DB) (string, error) {
	var stored string
	err := db.queryRow(ctx, readSecretCheck).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the secret key check: %w", err)
	}
	return stored, nil
}

// SealedResponse is one stored answer sealed with the secret key, found
// false when the database holds none: a database made before the check
// value existed is recognised by whether its key opens one.
func SealedResponse(ctx context.Context, db *DB) (body []byte, found bool, err error) {
	err = db.queryRow(ctx, "SELECT response_body FROM idempotency_records WHERE response_sealed = ? AND response_body IS NOT NULL LIMIT 1", true).
		Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read a sealed stored answer: %w", err)
	}
	return body, true, nil
}
