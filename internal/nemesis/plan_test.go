package nemesis

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// targets is a Galera-like setup: links to three nodes, the provider, Redis
// the webhooks and the merchant, and every process fault.
func targets() Targets {
	var links []*Link
	for _, n := range []struct {
		name string
		kind LinkKind
	}{{"db-node1", DBLink}, {"db-node2", DBLink}, {"db-node3", DBLink}, {"provider", ProviderLink},
		{"redis-1", RedisLink}, {"webhook", WebhookLink}, {"merchant-1", MerchantLink}, {"merchant-2", MerchantLink}} {
		links = append(links, &Link{Name: n.name, Kind: n.kind})
	}
	return Targets{Links: links, Process: map[Kind][]string{
		KillReplica:    {"payd-1", "payd-2", "payd-3"},
		KillGaleraNode: {"node1", "node2", "node3"},
		RedisFailover:  {"redis"},
		DBRestart:      {"db"},
	}}
}

func TestNewPlanIsDeterministic(t *testing.T) {
	a, b := NewPlan(7, 90*time.Second, targets()), NewPlan(7, 90*time.Second, targets())
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 gave two plans:\n%s\n%s", a, b)
	}
	if c := NewPlan(8, 90*time.Second, targets()); reflect.DeepEqual(a.Faults, c.Faults) {
		t.Fatalf("seeds 7 and 8 gave the same plan:\n%s", a)
	}
	if a.Seed != 7 || a.Duration != 90*time.Second {
		t.Fatalf("plan seed %d duration %s, want 7 and 90s", a.Seed, a.Duration)
	}
}

func TestNewPlanCoversEveryKind(t *testing.T) {
	for _, d := range []time.Duration{60 * time.Second, 90 * time.Second, 30 * time.Minute} {
		for seed := range int64(50) {
			tg := targets()
			p := NewPlan(seed, d, tg)
			kindOf := map[string]LinkKind{}
			for _, l := range tg.Links {
				kindOf[l.Name] = l.Kind
			}
			seen := map[Kind]int{}
			onLink := map[string]int{} // "latency on db"
			for _, f := range p.Faults {
				seen[f.Kind]++
				if f.Kind.Wire() {
					onLink[string(f.Kind)+" on "+string(kindOf[f.Target])]++
				}
			}
			for _, k := range append(slices.Clone(WireKinds), ProcessKinds...) {
				if seen[k] == 0 {
					t.Fatalf("seed %d, %s: no %s in\n%s", seed, d, k, p)
				}
			}
			for _, k := range WireKinds {
				for _, lk := range []LinkKind{DBLink, ProviderLink, RedisLink, WebhookLink, MerchantLink} {
					if onLink[string(k)+" on "+string(lk)] == 0 {
						t.Fatalf("seed %d, %s: no %s on a %s link in\n%s", seed, d, k, lk, p)
					}
				}
			}
		}
	}
}

func TestNewPlanOnlyWhatTheSetupOffers(t *testing.T) {
	tg := targets()
	tg.Process = map[Kind][]string{KillReplica: {"payd-1"}}
	tg.Links = tg.Links[:1]
	for _, f := range NewPlan(3, 90*time.Second, tg).Faults {
		if f.Kind.Wire() && f.Target != "db-node1" || !f.Kind.Wire() && (f.Kind != KillReplica || f.Target != "payd-1") {
			t.Fatalf("fault %s: not offered", f)
		}
	}
	if p := NewPlan(3, 90*time.Second, Targets{}); len(p.Faults) != 0 {
		t.Fatalf("a setup with nothing to offer got\n%s", p)
	}
}

// TestNewPlanShape checks what every plan promises: faults in order, each
// healed by the end, process faults one at a time, wire faults that meet
// (but one at a time on a link's direction),
// parameters within their ranges, and a schedule dense enough.
func TestNewPlanShape(t *testing.T) {
	tg := targets()
	names := map[string]bool{}
	for _, l := range tg.Links {
		names[l.Name] = true
	}
	for _, d := range []time.Duration{20 * time.Second, 90 * time.Second, 30 * time.Minute} {
		for seed := range int64(50) {
			p := NewPlan(seed, d, tg)
			check := func(ok bool, f Fault, what string) {
				t.Helper()
				if !ok {
					t.Fatalf("seed %d, %s: %s: %s\n%s", seed, d, f, what, p)
				}
			}
			var process []Fault
			overlap := false
			for i, f := range p.Faults {
				check(i == 0 || p.Faults[i-1].At <= f.At, f, "out of order")
				check(f.At >= 0 && f.For >= minFor && f.At+f.For <= d, f, "not healed by the end")
				if !f.Kind.Wire() {
					process = append(process, f)
					check(slices.Contains(tg.Process[f.Kind], f.Target), f, "no such target")
					continue
				}
				check(names[f.Target], f, "no such link")
				check(f.Stream == Upstream || f.Stream == Downstream, f, "no stream")
				for _, g := range p.Faults[:i] {
					if g.Kind.Wire() && f.At < g.At+g.For {
						overlap = true
						check(g.Target != f.Target || g.Stream != f.Stream, f, "meets "+g.String()+" on the same link and direction")
					}
				}
				switch f.Kind {
				case Latency:
					check(f.Latency >= 50*time.Millisecond && f.Latency <= time.Second && f.Jitter <= f.Latency/2, f, "latency out of range")
				case Timeout, SlowClose:
					check(f.Timeout == 0 && f.Kind == Timeout || f.Timeout >= 200*time.Millisecond && f.Timeout <= 3*time.Second, f, "timeout out of range")
				case Bandwidth:
					check(f.RateKB >= 1 && f.RateKB <= 16, f, "rate out of range")
				case LimitData:
					check(f.Bytes >= 10 && f.Bytes <= 2000, f, "bytes out of range")
				}
			}
			for i := 1; i < len(process); i++ {
				check(process[i].At >= process[i-1].At+process[i-1].For, process[i], "two process faults at once")
			}
			if !overlap {
				t.Fatalf("seed %d, %s: no two wire faults overlap\n%s", seed, d, p)
			}
			if d == 90*time.Second && (len(p.Faults) < 20 || len(p.Faults) > 40) {
				t.Fatalf("seed %d: %d faults in 90 s, want 20 to 40\n%s", seed, len(p.Faults), p)
			}
		}
	}
}

func TestPlanStringOneLinePerFault(t *testing.T) {
	p := NewPlan(7, 90*time.Second, targets())
	lines := strings.Split(strings.TrimSuffix(p.String(), "\n"), "\n")
	if len(lines) != len(p.Faults)+1 || !strings.Contains(lines[0], "seed=7") {
		t.Fatalf("String() has %d lines for %d faults:\n%s", len(lines), len(p.Faults), p)
	}
	for i, f := range p.Faults {
		if !strings.Contains(lines[i+1], string(f.Kind)) || !strings.Contains(lines[i+1], f.Target) {
			t.Fatalf("line %q does not name %s on %s", lines[i+1], f.Kind, f.Target)
		}
	}
	got := Fault{At: 1500 * time.Millisecond, For: 2 * time.Second, Kind: Latency, Target: "db-node2",
		Stream: Downstream, Latency: 200 * time.Millisecond, Jitter: 50 * time.Millisecond}.String()
	if want := "   1.5s +2.0s latency          db-node2 downstream 200ms ±50ms"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
