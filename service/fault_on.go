//go:build paydfault

package service

import (
	"os"
	"sync/atomic"
	"syscall"
)

// Test builds only (go build -tags paydfault): the crash tests kill payd,
// as kill -9 would, at a chosen step of a payment. A shipped binary has no
// way to do so.

var faultPoint atomic.Pointer[string]

// CrashAt makes this process kill itself (SIGKILL) when a payment reaches
// point: after_claim, after_charge, before_settle_commit or
// after_settle_commit; or when an order's creation has committed and not
// yet answered: order_created; or when a shipment has committed and not
// yet answered: shipment_made; or when a hold's capture or void has
// claimed it (hold_claimed), heard the provider (hold_sent) or settled
// (hold_settled); or when a reconciliation run has saved a
// page of its checkpoint: reconcile_page_saved. An empty point crashes
// nowhere.
func CrashAt(point string) { faultPoint.Store(&point) }

// fault kills the process if it is the point CrashAt chose.
func fault(at string) {
	if p := faultPoint.Load(); p != nil && *p != "" && *p == at {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; nothing more may happen
	}
}
