package domain

// RetryReason says why payd ran a database statement or transaction again:
// the database undid it in a conflict. It is the reason label of
// payd_db_retries_total, told by the repository and counted by telemetry.
type RetryReason string

// The retry reasons, a fixed set.
const (
	RetryDeadlock    RetryReason = "deadlock"          // MySQL 1213: deadlock or Galera certification failure
	RetryLockTimeout RetryReason = "lock_wait_timeout" // MySQL 1205
	RetrySQLiteBusy  RetryReason = "sqlite_busy"       // SQLITE_BUSY / SQLITE_LOCKED
)

// RetryReasons lists every retry reason.
var RetryReasons = []RetryReason{RetryDeadlock, RetryLockTimeout, RetrySQLiteBusy}
