package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ShopRow is what the shop heard while one kind of fault was on a
// merchant link (Kind "" for the arrivals that met none): the faults, the
// requests that arrived through a faulted link meanwhile, and how many of
// those payd sent again later (its 2xx did not reach payd, or came too
// late).
type ShopRow struct {
	Kind             Kind
	Faults           int
	Arrivals, Resent int
}

// ShopMatrix is the shop's side of the fault matrix: a row per fault
// kind the plan put on a merchant link, then the row of no fault.
type ShopMatrix struct{ Rows []ShopRow }

// Shop counts the arrivals of the schedule (run from start) by the
// faults on merchant links they met: an arrival through replica via's
// link (linkOf: replica → its merchant link's name) at a moment a fault
// of that link's schedule was on. An arrival counts once in a row, and in
// every row whose faults it met; arrivals after the schedule are in no
// row.
func Shop(p Plan, start time.Time, arrivals []Arrival, linkOf map[string]string) ShopMatrix {
	rows := map[Kind]*ShopRow{}
	row := func(k Kind) *ShopRow {
		if rows[k] == nil {
			rows[k] = &ShopRow{Kind: k}
		}
		return rows[k]
	}
	merchant := map[string]bool{}
	for _, l := range linkOf {
		merchant[l] = true
	}
	for _, f := range p.Faults {
		if f.Kind.Wire() && merchant[f.Target] {
			row(f.Kind).Faults++
		}
	}
	last := map[string]time.Time{} // each event's last arrival
	for _, a := range arrivals {
		if a.At.After(last[a.WebhookID]) {
			last[a.WebhookID] = a.At
		}
	}
	end := start.Add(p.Duration)
	quiet := row("")
	for _, a := range arrivals {
		if a.At.After(end) {
			continue
		}
		met := map[Kind]bool{}
		for _, f := range p.Faults {
			from := start.Add(f.At)
			if f.Kind.Wire() && f.Target == linkOf[a.Via] && !a.At.Before(from) && !a.At.After(from.Add(f.For)) {
				met[f.Kind] = true
			}
		}
		resent := last[a.WebhookID].After(a.At)
		count := func(r *ShopRow) {
			r.Arrivals++
			if resent {
				r.Resent++
			}
		}
		if len(met) == 0 {
			count(quiet)
		}
		for k := range met {
			count(row(k))
		}
	}
	var m ShopMatrix
	for _, r := range rows {
		m.Rows = append(m.Rows, *r)
	}
	rank := func(r ShopRow) int {
		if r.Kind == "" {
			return len(WireKinds)
		}
		return slices.Index(WireKinds, r.Kind)
	}
	slices.SortFunc(m.Rows, func(a, b ShopRow) int { return rank(a) - rank(b) })
	return m
}

// Markdown renders the shop's matrix as a Markdown table.
func (m ShopMatrix) Markdown() string {
	var b strings.Builder
	b.WriteString("| fault | link | faults | arrivals | sent again |\n|---|---|--:|--:|--:|\n")
	for _, r := range m.Rows {
		if r.Kind == "" {
			fmt.Fprintf(&b, "| no fault | — | — | %d | %d |\n", r.Arrivals, r.Resent)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d |\n", r.Kind, MerchantLink, r.Faults, r.Arrivals, r.Resent)
	}
	return b.String()
}
