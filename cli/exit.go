package cli

import (
	"errors"
	"fmt"
)

// payd's exit statuses (ADR 41): 0 success, help that was asked for
// included; 1 a failure at run time or a wrong setting in the environment;
// 2 a command line payd cannot take, as Go's flag package has it. payd
// healthcheck exits 0 or 1 only.
const (
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a command line payd cannot take: an unknown command or
// flag, a flag's bad value, a missing or unexpected argument. Exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string   { return e.err.Error() }
func (e *usageError) Unwrap() error   { return e.err }
func (e *usageError) exitStatus() int { return exitUsage }

// usage marks err as the command line's fault.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// usagef is usage of a new error.
func usagef(format string, args ...any) error { return usage(fmt.Errorf(format, args...)) }

// failure gives err exit status 1 whatever it wraps: payd healthcheck's
// errors, usage errors included, since Docker reserves a health check's 2.
type failure struct{ err error }

func (e *failure) Error() string   { return e.err.Error() }
func (e *failure) Unwrap() error   { return e.err }
func (e *failure) exitStatus() int { return exitFailure }

// ExitStatus is the process exit status for Main's error: 0 for none, 2
// for a usage error, 1 for any other. The outermost error that states a
// status decides.
func ExitStatus(err error) int {
	var s interface{ exitStatus() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &s):
		return s.exitStatus()
	}
	return exitFailure
}
