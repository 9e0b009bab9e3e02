package repository

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"

	"github.com/payd/payd/domain"
)

// SQLite extended result codes for unique violations.
const (
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// mysqlDuplicateEntry is ER_DUP_ENTRY.
const mysqlDuplicateEntry = 1062

// isUniqueViolation reports whether err is a duplicate key on a unique index
// or primary key, in either dialect.
func isUniqueViolation(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == mysqlDuplicateEntry
	}
	// The SQLite driver's error type lives in an indirect dependency; its
	// Code method is all we need.
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		code := lite.Code()
		return code == sqliteConstraintUnique || code == sqliteConstraintPrimaryKey
	}
	return false
}

// violatesIndex reports whether err is a unique violation on the index that
// names column: MySQL names the key (customers_email), SQLite the column
// (customers.email). Index names follow table_column in the migrations.
func violatesIndex(err error, table, column string) bool {
	if !isUniqueViolation(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, table+"_"+column) || strings.Contains(msg, table+"."+column)
}

// notFound turns "no row" into the caller's sentinel; other errors pass.
func notFound(err, sentinel error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, sql.ErrNoRows) {
		return sentinel
	}
	return err
}

// toMinor converts an amount to integer minor units and refuses one that
// would lose precision (more decimals than the currency has, or an overflow)
// or whose currency payd does not know: money is stored exactly or not at all.
func toMinor(d decimal.Decimal, c domain.Currency, field string) (int64, error) {
	if _, err := domain.ParseCurrency(string(c)); err != nil {
		return 0, err
	}
	m := domain.MinorUnits(d, c)
	if !domain.FromMinorUnits(m, c).Equal(d) {
		return 0, fmt.Errorf("%s %s is not a whole number of %s minor units", field, d, c)
	}
	return m, nil
}
