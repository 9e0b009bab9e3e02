package domain

import (
	"fmt"
	"slices"
)

// Machine is one of payd's state machines as a table: the statuses a row
// may hold, the statuses it may be stored in when it is created, and for
// each event the statuses it may leave from and the one it leads to.
// Anything else is refused. The repository builds each guarded statement
// from its event's entry (WHERE status IN From ... SET status = To), and
// the database's CHECK constraint on the status column holds the same
// statuses, so the code, the guards and the schema cannot drift apart.
//
// The machines are OrderMachine, FulfillmentMachine, AttemptMachine,
// HoldActionMachine, RefundMachine, DiscrepancyMachine, RecordMachine,
// DisputeMachine and DeliveryMachine.
type Machine[S ~string, E ~string] struct {
	name     string
	statuses []S
	initial  []S
	events   []E
	table    map[E]transition[S]
}

// transition is one entry of a machine's table.
type transition[S ~string] struct {
	from []S
	to   S
}

// step is how a table entry is written down: event, from, to.
type step[S ~string, E ~string] struct {
	event E
	from  []S
	to    S
}

// newMachine builds a machine and refuses (panics, at start-up) a table
// that names a status the machine does not list, lists an event twice, or
// leaves an event from no status.
func newMachine[S ~string, E ~string](name string, statuses, initial []S, steps ...step[S, E]) *Machine[S, E] {
	m := &Machine[S, E]{name: name, statuses: statuses, initial: initial, table: make(map[E]transition[S], len(steps))}
	known := func(s S) {
		if !slices.Contains(statuses, s) {
			panic(fmt.Sprintf("domain: %s machine: unknown status %q", name, s))
		}
	}
	for _, s := range initial {
		known(s)
	}
	for _, st := range steps {
		if _, dup := m.table[st.event]; dup || len(st.from) == 0 {
			panic(fmt.Sprintf("domain: %s machine: event %q listed twice or from no status", name, st.event))
		}
		for _, s := range st.from {
			known(s)
		}
		known(st.to)
		m.events = append(m.events, st.event)
		m.table[st.event] = transition[S]{from: st.from, to: st.to}
	}
	return m
}

// Name names the machine ("order", "attempt", ...).
func (m *Machine[S, E]) Name() string { return m.name }

// Statuses lists every status of the machine: the values its status
// column may hold.
func (m *Machine[S, E]) Statuses() []S { return slices.Clone(m.statuses) }

// Initial lists the statuses a row may be created in.
func (m *Machine[S, E]) Initial() []S { return slices.Clone(m.initial) }

// Events lists every event of the machine, in the table's order.
func (m *Machine[S, E]) Events() []E { return slices.Clone(m.events) }

// Valid reports whether s is one of the machine's statuses.
func (m *Machine[S, E]) Valid(s S) bool { return slices.Contains(m.statuses, s) }

// From returns the statuses e may leave from (none for an unknown event).
func (m *Machine[S, E]) From(e E) []S { return slices.Clone(m.table[e].from) }

// To returns the status e leads to (the zero status for an unknown event).
func (m *Machine[S, E]) To(e E) S { return m.table[e].to }

// Next returns the status e leads to from status from, and whether the
// machine allows it.
func (m *Machine[S, E]) Next(from S, e E) (S, bool) {
	t, ok := m.table[e]
	if !ok || !slices.Contains(t.from, from) {
		return "", false
	}
	return t.to, true
}
