package nemesis

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// Wire faults are Toxiproxy toxics on a link; process faults act on a
// whole process through the setup's callbacks (Runner.Process).
const (
	Latency   Kind = "latency"    // every chunk delayed by Latency ± Jitter
	Timeout   Kind = "timeout"    // nothing passes; the connection is closed after Timeout, or held until healed when 0
	ResetPeer Kind = "reset_peer" // the connection is reset (RST) Timeout after data arrives
	SlowClose Kind = "slow_close" // the close is passed on Timeout late
	Bandwidth Kind = "bandwidth"  // at most RateKB KB/s
	LimitData Kind = "limit_data" // the connection is closed after Bytes bytes

	KillReplica    Kind = "kill_replica"     // a payd replica killed with SIGKILL, started again when healed
	KillGaleraNode Kind = "kill_galera_node" // a Galera node killed, rejoined when healed
	RedisFailover  Kind = "redis_failover"   // a Redis master failed over to its replica
	DBRestart      Kind = "db_restart"       // the database stopped, started again when healed
)

// WireKinds and ProcessKinds list the kinds in the order a plan draws them.
var (
	WireKinds    = []Kind{Latency, Timeout, ResetPeer, SlowClose, Bandwidth, LimitData}
	ProcessKinds = []Kind{KillReplica, KillGaleraNode, RedisFailover, DBRestart}
)

// Wire says whether k is a toxic on a link.
func (k Kind) Wire() bool { return slices.Contains(WireKinds, k) }

// The directions of a link a wire fault applies to: upstream is what the
// client sends, downstream what it receives.
const (
	Upstream   = "upstream"
	Downstream = "downstream"
)

// Fault is one scheduled fault.
type Fault struct {
	At, For         time.Duration // from the schedule's start; healed after For
	Kind            Kind
	Target          string        // the link's Name, or the process target's name (e.g. "payd-2", "node3", "redis")
	Stream          string        // Upstream or Downstream (wire faults)
	Latency, Jitter time.Duration // latency
	Timeout         time.Duration // timeout toxic's timeout (0: black hole until healed), reset_peer's, slow_close's delay
	RateKB          int64         // bandwidth
	Bytes           int64         // limit_data
}

// String is one readable line: when, how long, what, where, how.
func (f Fault) String() string {
	at := fmt.Sprintf("%6.1fs +%.1fs", f.At.Seconds(), f.For.Seconds())
	var how string
	switch f.Kind {
	case Latency:
		how = fmt.Sprintf("%s ±%s", f.Latency, f.Jitter)
	case Timeout:
		how = "black hole"
		if f.Timeout > 0 {
			how = "closed after " + f.Timeout.String()
		}
	case ResetPeer:
		how = "reset after " + f.Timeout.String()
	case SlowClose:
		how = "close delayed " + f.Timeout.String()
	case Bandwidth:
		how = fmt.Sprintf("%d KB/s", f.RateKB)
	case LimitData:
		how = fmt.Sprintf("cut after %d bytes", f.Bytes)
	}
	if f.Kind.Wire() {
		return fmt.Sprintf("%s %-16s %s %s %s", at, f.Kind, f.Target, f.Stream, how)
	}
	return fmt.Sprintf("%s %-16s %s", at, f.Kind, f.Target)
}

// Targets is what a setup offers the nemesis.
type Targets struct {
	Links   []*Link
	Process map[Kind][]string // process faults this setup can do, and on which targets
}

// Plan is a schedule of faults, ordered by At.
type Plan struct {
	Seed     int64
	Duration time.Duration
	Faults   []Fault
}

// String is a header line and one line per fault, for a failure message.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nemesis plan seed=%d duration=%s: %d faults\n", p.Seed, p.Duration, len(p.Faults))
	for _, f := range p.Faults {
		b.WriteString("  ")
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Shape of a plan. Faults last a few seconds, so that payd meets many of
// them, and combinations of them, in a 90-second run.
const (
	minFor, maxFor = 1 * time.Second, 8 * time.Second
	// wireEvery is the mean time between two wire faults' starts: with
	// faults of 4.5 s on average about one and a half are on at a time.
	wireEvery = 3 * time.Second
	// processSlot is the least time given to one process fault: the fault,
	// its heal (a Galera node's rejoin, a replica's start) and some quiet
	// before the next one.
	processSlot = 15 * time.Second
	// processEvery is the mean time between process faults in a long run.
	processEvery = 30 * time.Second
	// coverAll is the least duration for which every kind is drawn.
	coverAll = 60 * time.Second
)

// NewPlan is deterministic in (seed, d, targets): the same seed gives the
// same plan. Every wire kind on every kind of link (when there are links)
// and every process kind of targets occurs at least once when d ≥ 60s; wire faults overlap one
// another (on different links or directions: one direction of a link has
// one at a time) and the process faults; every fault is healed by d (the
// end of the schedule). Process faults are never two at once: each has a
// slot of its own of at least 15 s, for its heal to finish before the next.
func NewPlan(seed int64, d time.Duration, tg Targets) Plan {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e656d65736973)) // "nemesis"
	p := Plan{Seed: seed, Duration: d}
	p.Faults = append(p.Faults, wireFaults(rng, d, tg.Links)...)
	p.Faults = append(p.Faults, processFaults(rng, d, tg.Process)...)
	slices.SortStableFunc(p.Faults, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	return p
}

// wireFaults draws about one wire fault every wireEvery, on random links
// and directions. When d allows, every kind meets every kind of link
// first: a latency on a database link and one on the provider's are
// different tests, and a 90-second run must hold both. A direction of a
// link has one fault at a time (see Link.Add); faults on different links
// or directions overlap freely.
func wireFaults(rng *rand.Rand, d time.Duration, links []*Link) []Fault {
	if len(links) == 0 || d < minFor {
		return nil
	}
	type want struct {
		kind  Kind
		links []*Link // the links it may go on
	}
	var wants []want
	if d >= coverAll {
		for _, lk := range linkKinds(links) {
			of := linksOf(links, lk)
			for _, k := range WireKinds {
				wants = append(wants, want{k, of})
			}
		}
		// Every pair first, while the schedule is empty, so each finds room.
		rng.Shuffle(len(wants), func(i, j int) { wants[i], wants[j] = wants[j], wants[i] })
	}
	for len(wants) < int(d/wireEvery) {
		wants = append(wants, want{WireKinds[rng.IntN(len(WireKinds))], links})
	}
	var faults []Fault
	for _, w := range wants {
		f := Fault{Kind: w.kind, For: between(rng, minFor, min(maxFor, d))}
		if !place(rng, &f, d, w.links, faults) {
			continue // no room left: a short schedule on few links
		}
		wireParams(rng, &f)
		faults = append(faults, f)
	}
	slices.SortStableFunc(faults, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
	return faults
}

// linkKinds is the kinds of links, in the order they first appear.
func linkKinds(links []*Link) []LinkKind {
	var out []LinkKind
	for _, l := range links {
		if !slices.Contains(out, l.Kind) {
			out = append(out, l.Kind)
		}
	}
	return out
}

// linksOf is the links of one kind.
func linksOf(links []*Link, kind LinkKind) []*Link {
	var out []*Link
	for _, l := range links {
		if l.Kind == kind {
			out = append(out, l)
		}
	}
	return out
}

// place draws f's time, link and direction where no other fault is on that
// link and direction meanwhile: at random a few times, then the first room
// from the start.
func place(rng *rand.Rand, f *Fault, d time.Duration, links []*Link, placed []Fault) bool {
	free := func() bool {
		for _, g := range placed {
			if g.Target == f.Target && g.Stream == f.Stream && f.At < g.At+g.For && g.At < f.At+f.For {
				return false
			}
		}
		return true
	}
	for range 20 {
		f.At = between(rng, 0, d-f.For)
		f.Target = links[rng.IntN(len(links))].Name
		f.Stream = Downstream
		if rng.IntN(2) == 0 {
			f.Stream = Upstream
		}
		if free() {
			return true
		}
	}
	for at := time.Duration(0); at+f.For <= d; at += 100 * time.Millisecond {
		for _, l := range links {
			for _, stream := range []string{Upstream, Downstream} {
				f.At, f.Target, f.Stream = at, l.Name, stream
				if free() {
					return true
				}
			}
		}
	}
	return false
}

// wireParams draws a wire fault's parameters: bad enough to matter, not so
// bad that every request fails (a latency spike, not an outage).
func wireParams(rng *rand.Rand, f *Fault) {
	switch f.Kind {
	case Latency:
		f.Latency = between(rng, 50*time.Millisecond, time.Second)
		f.Jitter = between(rng, 0, f.Latency/2)
	case Timeout:
		if rng.IntN(2) == 1 {
			f.Timeout = between(rng, 200*time.Millisecond, 3*time.Second)
		}
	case ResetPeer:
		f.Timeout = between(rng, 0, 500*time.Millisecond)
	case SlowClose:
		f.Timeout = between(rng, 200*time.Millisecond, 3*time.Second)
	case Bandwidth:
		f.RateKB = 1 + rng.Int64N(16)
	case LimitData:
		f.Bytes = 10 + rng.Int64N(1991)
	}
}

// processFaults cuts d into equal slots of at least processSlot and puts
// one process fault in each, so no two are ever on at once; every kind
// offered comes once before any comes twice.
func processFaults(rng *rand.Rand, d time.Duration, offered map[Kind][]string) []Fault {
	var kinds []Kind
	for _, k := range ProcessKinds { // a fixed order: the map's is random
		if len(offered[k]) > 0 {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	n := int(d / processEvery)
	if d >= coverAll {
		n = max(n, len(kinds))
	}
	n = min(n, int(d/processSlot))
	if n == 0 {
		return nil
	}
	order := make([]Kind, 0, n)
	for len(order) < n {
		round := slices.Clone(kinds)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		order = append(order, round[:min(len(round), n-len(order))]...)
	}
	slot := d / time.Duration(n)
	faults := make([]Fault, 0, n)
	for i, k := range order {
		targets := offered[k]
		f := Fault{Kind: k, Target: targets[rng.IntN(len(targets))], For: between(rng, minFor, maxFor)}
		// Half the slot at most for the fault itself: the rest is for its heal.
		f.At = time.Duration(i)*slot + between(rng, 0, slot/2-f.For)
		faults = append(faults, f)
	}
	return faults
}

// between draws a duration in [lo, hi], in steps of 10 ms for readable plans.
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	const step = 10 * time.Millisecond
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64((hi-lo)/step)+1))*step
}
