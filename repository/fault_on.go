//go:build paydfault

package repository

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Test builds only (go build -tags paydfault): the crash tests kill payd,
// as kill -9 would, at a chosen step inside one of this package's
// transactions, where the service's fault points (service.CrashAt) cannot
// reach. A shipped binary has no way to do so.

var faultPoint atomic.Pointer[string]

// CrashAt makes this process kill itself (SIGKILL) when a transaction of
// this package reaches point: order_stock_taken (an order's creation has
// inserted the order and taken its stock, and has not committed) or
// order_shipped (a shipment has raised its lines, moved the order and
// written itself and its event, and has not committed). An empty point
// crashes nowhere.
func CrashAt(point string) { faultPoint.Store(&point) }

// fault kills the process if it is the point CrashAt chose.
func fault(at string) {
	if p := faultPoint.Load(); p != nil && *p != "" && *p == at {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; nothing more may happen
	}
}
