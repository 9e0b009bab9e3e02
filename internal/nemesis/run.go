package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ProcessFault injects a process fault on target and returns how to heal
// it (restart the replica, rejoin the node, ...).
type ProcessFault func(ctx context.Context, target string) (heal func(context.Context) error, err error)

// Runner applies a plan to a setup.
type Runner struct {
	Net     *Net
	Process map[Kind]ProcessFault
	Log     func(format string, args ...any) // may be nil
}

// healTimeout bounds the heal of a process fault. The heal's context is not
// the run's: a heal cut short by the run's end would leave the setup
// broken for the checker's final reads.
const healTimeout = 2 * time.Minute

// Run applies each fault at its At, heals it after its For, and heals
// everything (links and any process fault still open) before it returns,
// also when ctx ends. It returns faults injected by kind.
//
// Wire faults keep to the clock. Process faults run one after the other:
// one whose turn comes while the previous heal still runs (a slow rejoin)
// starts late rather than at the same time. A fault that could not be
// injected is logged, left out of the counts and returned as an error
// after the schedule has run to its end.
func (r *Runner) Run(ctx context.Context, p Plan) (map[string]int, error) {
	if err := r.check(p); err != nil {
		return nil, err
	}
	start := time.Now()
	run := &run{r: r, start: start, counts: map[string]int{}}

	var wire, process []Fault
	for _, f := range p.Faults {
		if f.Kind.Wire() {
			wire = append(wire, f)
		} else {
			process = append(process, f)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { run.processes(ctx, process) })
	run.wires(ctx, wire)
	wg.Wait()

	if err := r.Net.Heal(); err != nil {
		run.fail(fmt.Errorf("heal the links: %w", err))
	}
	run.logf("healed everything")
	if ctx.Err() != nil {
		run.fail(fmt.Errorf("nemesis: schedule cut short: %w", ctx.Err()))
	}
	return run.counts, errors.Join(run.errs...)
}

// check refuses a plan this runner cannot apply, before anything starts.
func (r *Runner) check(p Plan) error {
	for _, f := range p.Faults {
		if f.Kind.Wire() {
			if r.Net == nil {
				return fmt.Errorf("nemesis: %s on %s: no net", f.Kind, f.Target)
			}
			if _, ok := r.Net.Lookup(f.Target); !ok {
				return fmt.Errorf("nemesis: %s: no link %s", f.Kind, f.Target)
			}
			continue
		}
		if r.Process[f.Kind] == nil {
			return fmt.Errorf("nemesis: %s on %s: this setup cannot do it", f.Kind, f.Target)
		}
	}
	return nil
}

// run is one Run's state.
type run struct {
	r     *Runner
	start time.Time

	mu     sync.Mutex
	counts map[string]int
	errs   []error
}

func (run *run) logf(format string, args ...any) {
	if run.r.Log == nil {
		return
	}
	off := time.Since(run.start).Round(10 * time.Millisecond)
	run.r.Log("nemesis %7s "+format, append([]any{off}, args...)...)
}

func (run *run) injected(k Kind) {
	run.mu.Lock()
	defer run.mu.Unlock()
	run.counts[string(k)]++
}

func (run *run) fail(err error) {
	run.logf("%v", err)
	run.mu.Lock()
	defer run.mu.Unlock()
	run.errs = append(run.errs, err)
}

// until waits for the offset at of the schedule, or for ctx to end.
func (run *run) until(ctx context.Context, at time.Duration) bool {
	t := time.NewTimer(time.Until(run.start.Add(at)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// wires applies the wire faults: each is added at its At and removed at
// At+For, in the order of those times.
func (run *run) wires(ctx context.Context, faults []Fault) {
	type event struct {
		at    time.Duration
		heal  bool
		fault int
	}
	events := make([]event, 0, 2*len(faults))
	for i, f := range faults {
		events = append(events, event{f.At, false, i}, event{f.At + f.For, true, i})
	}
	// By time; at the same time heals first, so a link is never worse
	// than the plan says.
	slices.SortStableFunc(events, func(a, b event) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if a.heal != b.heal {
			if a.heal {
				return -1
			}
			return 1
		}
		return 0
	})
	toxics := make([]string, len(faults)) // the toxic's name once added
	for _, e := range events {
		if !run.until(ctx, e.at) {
			return // Run heals what is still on
		}
		f := faults[e.fault]
		l, _ := run.r.Net.Lookup(f.Target)
		if !e.heal {
			name, err := l.Add(f)
			if err != nil {
				run.fail(fmt.Errorf("inject %s: %w", f, err))
				continue
			}
			toxics[e.fault] = name
			run.injected(f.Kind)
			run.logf("inject %s", f)
			continue
		}
		if toxics[e.fault] == "" {
			continue // never injected
		}
		if err := l.Remove(toxics[e.fault]); err != nil {
			run.fail(fmt.Errorf("heal %s: %w", f, err))
			continue
		}
		run.logf("heal   %s", f)
	}
}

// processes applies the process faults one at a time.
func (run *run) processes(ctx context.Context, faults []Fault) {
	for _, f := range faults {
		if !run.until(ctx, f.At) {
			return
		}
		heal, err := run.r.Process[f.Kind](ctx, f.Target)
		if err != nil {
			run.fail(fmt.Errorf("inject %s: %w", f, err))
			if heal == nil {
				continue
			}
		} else {
			run.injected(f.Kind)
			run.logf("inject %s", f)
		}
		if heal == nil {
			continue
		}
		run.until(ctx, f.At+f.For)
		// The heal has a context of its own, so that the end of ctx (now or
		// halfway through a rejoin) does not leave the setup broken.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healTimeout)
		err = heal(hctx)
		cancel()
		if err != nil {
			run.fail(fmt.Errorf("heal %s: %w", f, err))
			continue
		}
		run.logf("heal   %s", f)
	}
}
