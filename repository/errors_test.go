package repository

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// sqliteErr stands in for the SQLite driver's error, which has a Code method.
type sqliteErr struct {
	code int
	msg  string
}

func (e *sqliteErr) Error() string { return e.msg }
func (e *sqliteErr) Code() int     { return e.code }

func TestIsUniqueViolation(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'x' for key 'customers_email'"}, true},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1062}), true},
		{&mysql.MySQLError{Number: 1452, Message: "foreign key"}, false},
		{&sqliteErr{2067, "UNIQUE constraint failed: customers.email"}, true},
		{&sqliteErr{1555, "UNIQUE constraint failed: idempotency_records.scope, idempotency_records.idem_key"}, true},
		{&sqliteErr{787, "FOREIGN KEY constraint failed"}, false},
		{errors.New("UNIQUE constraint failed"), false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := isUniqueViolation(tt.err); got != tt.want {
			t.Errorf("isUniqueViolation(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestViolatesIndex(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'a@b.c' for key 'customers_email'"}, true},
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'a@b.c' for key 'customers.customers_email'"}, true},
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'x' for key 'PRIMARY'"}, false},
		{&sqliteErr{2067, "UNIQUE constraint failed: customers.email"}, true},
		{&sqliteErr{2067, "UNIQUE constraint failed: customers.token_hash"}, false},
	}
	for _, tt := range tests {
		if got := violatesIndex(tt.err, "customers", "email"); got != tt.want {
			t.Errorf("violatesIndex(%v, customers, email) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	if got := notFound(gorm.ErrRecordNotFound, domain.ErrOrderNotFound); got != domain.ErrOrderNotFound {
		t.Errorf("notFound(ErrRecordNotFound) = %v, want %v", got, domain.ErrOrderNotFound)
	}
	other := errors.New("boom")
	if got := notFound(other, domain.ErrOrderNotFound); got != other {
		t.Errorf("notFound(boom) = %v, want boom", got)
	}
}

func TestToMinor(t *testing.T) {
	tests := []struct {
		amount   string
		currency domain.Currency
		want     int64
		wantErr  bool
	}{
		{"0.30", "USD", 30, false},
		{"1500", "JPY", 1500, false},
		{"1.234", "KWD", 1234, false},
		{"9999999999999.99", "USD", 999999999999999, false},
		{"0.105", "USD", 0, true}, // a fraction of a cent
		{"1.5", "JPY", 0, true},   // JPY has no minor unit
		{"1.00", "XXX", 0, true},  // unknown currency
		{"1e20", "USD", 0, true},  // overflows int64 minor units
	}
	for _, tt := range tests {
		got, err := toMinor(decimal.RequireFromString(tt.amount), tt.currency, "amount")
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("toMinor(%s, %s) = %d, %v, want %d (error %v)", tt.amount, tt.currency, got, err, tt.want, tt.wantErr)
		}
	}
}
