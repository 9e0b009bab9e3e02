package domain

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRefundBookMoves is the refund book's table: each move from a book
// and status, and what it leaves, or that it is refused.
func TestRefundBookMoves(t *testing.T) {
	const paid, refunded, pending = StatusPaid, StatusRefunded, StatusPending
	b := func(refunded, reserved int64) RefundBook {
		return RefundBook{Amount: 1000, Refunded: refunded, Reserved: reserved}
	}
	tests := []struct {
		name   string
		from   RefundBook
		status OrderStatus
		move   RefundMove
		minor  int64
		want   RefundBook
		to     OrderStatus
		ok     bool
	}{
		{"reserve part", b(0, 0), paid, MoveReserve, 400, b(0, 400), paid, true},
		{"reserve all: still paid", b(0, 0), paid, MoveReserve, 1000, b(0, 1000), paid, true},
		{"reserve beyond what reservations leave", b(0, 800), paid, MoveReserve, 201, b(0, 800), paid, false},
		{"reserve beyond what confirmed money leaves", b(400, 0), paid, MoveReserve, 601, b(400, 0), paid, false},
		{"reserve beyond both together", b(400, 400), paid, MoveReserve, 201, b(400, 400), paid, false},
		{"reserve what both leave", b(400, 400), paid, MoveReserve, 200, b(400, 600), paid, true},
		{"reserve on an unpaid order", b(0, 0), pending, MoveReserve, 1, b(0, 0), pending, false},
		{"reserve on a refunded order", b(1000, 0), refunded, MoveReserve, 1, b(1000, 0), refunded, false},
		{"settle part", b(0, 800), paid, MoveSettle, 800, b(800, 0), paid, true},
		{"settle the rest: refunded", b(200, 800), paid, MoveSettle, 800, b(1000, 0), refunded, true},
		{"settle more than reserved", b(0, 100), paid, MoveSettle, 200, b(0, 100), paid, false},
		{"settle beyond the payment", b(400, 800), paid, MoveSettle, 800, b(400, 800), paid, false},
		{"count an outside refund beside a reservation", b(0, 800), paid, MoveCount, 400, b(400, 800), paid, true},
		{"count the rest: refunded, reservation kept", b(0, 800), paid, MoveCount, 1000, b(1000, 800), refunded, true},
		{"count beyond the payment", b(700, 0), paid, MoveCount, 301, b(700, 0), paid, false},
		{"count on an unpaid order", b(0, 0), pending, MoveCount, 1, b(0, 0), pending, false},
		{"release keeps confirmed money", b(400, 800), paid, MoveRelease, 800, b(400, 0), paid, true},
		{"release on a refunded order", b(1000, 800), refunded, MoveRelease, 800, b(1000, 0), refunded, true},
		{"release more than reserved", b(400, 100), paid, MoveRelease, 200, b(400, 100), paid, false},
		{"reverse part of a full refund: paid again", b(1000, 0), refunded, MoveReverse, 400, b(600, 0), paid, true},
		{"reverse keeps reservations", b(400, 300), paid, MoveReverse, 400, b(0, 300), paid, true},
		{"reverse more than confirmed", b(400, 0), paid, MoveReverse, 401, b(400, 0), paid, false},
		{"reverse on an unpaid order", b(0, 0), pending, MoveReverse, 1, b(0, 0), pending, false},
		{"zero", b(0, 0), paid, MoveCount, 0, b(0, 0), paid, false},
		{"negative", b(400, 0), paid, MoveReverse, -1, b(400, 0), paid, false},
		{"unknown move", b(0, 0), paid, RefundMove("nope"), 1, b(0, 0), paid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, to, err := tt.from.Apply(tt.status, tt.move, tt.minor)
			if tt.from.Allows(tt.status, tt.move, tt.minor) != tt.ok {
				t.Errorf("%+v.Allows(%s, %s, %d) = %v, want %v", tt.from, tt.status, tt.move, tt.minor, !tt.ok, tt.ok)
			}
			if tt.ok != (err == nil) || (!tt.ok && !errors.Is(err, ErrRefundBookRefused)) {
				t.Fatalf("Apply(%s, %s, %d) error = %v, want ok %v", tt.status, tt.move, tt.minor, err, tt.ok)
			}
			if got != tt.want || to != tt.to {
				t.Errorf("Apply(%s, %s, %d) = %+v, %s; want %+v, %s", tt.status, tt.move, tt.minor, got, to, tt.want, tt.to)
			}
		})
	}
}

// TestRefundBookStatusEvents holds each move's status change to the order
// machine: a move that changes the status does it by the event
// StatusEvent names, from a status that event leaves from.
func TestRefundBookStatusEvents(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := RefundBook{Amount: 1 + r.Int64N(20)}
		b.Refunded, b.Reserved = r.Int64N(b.Amount+1), r.Int64N(b.Amount+1)
		s := []OrderStatus{StatusPaid, StatusRefunded, StatusPending}[r.IntN(3)]
		m := RefundMoves[r.IntN(len(RefundMoves))]
		minor := r.Int64N(b.Amount + 2)
		after, to, err := b.Apply(s, m, minor)
		if err != nil {
			continue
		}
		ev, moves := b.StatusEvent(m, minor)
		if !moves {
			if to != s {
				t.Fatalf("%+v %s %s %d: status %s -> %s with no event", b, s, m, minor, s, to)
			}
			continue
		}
		next, nerr := Next(s, ev)
		if nerr != nil || next != to {
			t.Fatalf("%+v %s %s %d = %+v %s; its event %s gives %s, %v", b, s, m, minor, after, to, ev, next, nerr)
		}
		if after.Refunded < 0 || after.Reserved < 0 || after.Refunded > after.Amount {
			t.Fatalf("%+v %s %s %d = %+v: out of bounds", b, s, m, minor, after)
		}
	}
}

// TestReleaseLosesNothingConfirmed: whatever interleaving of reservations,
// settlements, outside refunds and releases, confirmed money is exactly
// what was settled and counted less what was reversed, and the status
// follows it alone.
func TestReleaseLosesNothingConfirmed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2_000 {
		b, s := RefundBook{Amount: 100}, StatusPaid
		var inFlight []int64
		confirmed := int64(0)
		for range 30 {
			var err error
			var next RefundBook
			var to OrderStatus
			switch r.IntN(4) {
			case 0:
				x := 1 + r.Int64N(40)
				if next, to, err = b.Apply(s, MoveReserve, x); err == nil {
					inFlight = append(inFlight, x)
				}
			case 1, 2:
				if len(inFlight) == 0 {
					continue
				}
				i := r.IntN(len(inFlight))
				x := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				if r.IntN(2) == 0 {
					if next, to, err = b.Apply(s, MoveSettle, x); err == nil {
						confirmed += x
					} else {
						next, to, err = b.Apply(s, MoveRelease, x)
					}
				} else {
					next, to, err = b.Apply(s, MoveRelease, x)
				}
			case 3:
				x := 1 + r.Int64N(30)
				if next, to, err = b.Apply(s, MoveCount, x); err == nil {
					confirmed += x
				}
			}
			if err != nil {
				continue
			}
			b, s = next, to
			if b.Refunded != confirmed || s != b.Status() {
				t.Fatalf("book %+v status %s, want refunded %d and status %s", b, s, confirmed, b.Status())
			}
		}
	}
}

// TestRefundMoveStatuses holds each move's statuses to the order
// machine's events that perform it.
func TestRefundMoveStatuses(t *testing.T) {
	for _, m := range []RefundMove{MoveReserve, MoveSettle, MoveCount} {
		if got, want := m.From(), EventRefundFull.From(); !slices.Equal(got, want) {
			t.Errorf("%s.From() = %v, want %v (a refund's)", m, got, want)
		}
	}
	for _, m := range []RefundMove{MoveRelease, MoveReverse} {
		if got, want := m.From(), EventRefundReversed.From(); !slices.Equal(got, want) {
			t.Errorf("%s.From() = %v, want %v (a reversal's)", m, got, want)
		}
	}
	if got := RefundMove("nope").From(); got != nil {
		t.Errorf("From() of an unknown move = %v, want none", got)
	}
}
