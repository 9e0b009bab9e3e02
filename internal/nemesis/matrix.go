package nemesis

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Outcomes are the columns of a fault matrix: the answers clients heard,
// by status, "none" when nothing came back.
var Outcomes = []string{"200", "201", "202", "402", "409", "503", "none", "other"}

// outcomeOf is the column an answer falls in.
func outcomeOf(op Op) string {
	switch op.Status {
	case 0:
		return "none"
	case 200, 201, 202, 402, 409, 503:
		return fmt.Sprint(op.Status)
	}
	return "other"
}

// MatrixRow is what the clients heard while one kind of fault was on one
// kind of link (Link is "" for a process fault, and Kind is "" for the row
// of requests that met no fault at all).
type MatrixRow struct {
	Kind    Kind
	Link    LinkKind
	Faults  int            // faults of this kind on links of this kind
	Ops     int            // requests whose time overlaps one of them
	Answers map[string]int // those requests by Outcomes
}

// FaultMatrix is a run's outcome per fault: a row for each (fault kind,
// link kind) and process fault kind the plan held, in the order the
// nemesis names them, then the row of requests that met none.
type FaultMatrix struct {
	Rows []MatrixRow
}

// Matrix counts, for each fault of p (run from start) by kind and by the
// kind of its link (links: link name → kind), the answers of the requests
// whose [Start, End] overlaps the fault's scheduled window [At, At+For].
// A request counts once in a row even if it met two of the row's faults,
// and in every row whose faults it met. Requests of the schedule that met
// no fault make the last row; requests after the schedule (the drain and
// the sweep) are in no row. Windows are the plan's: a process fault that
// started late, or whose heal took longer, is counted by its schedule.
func Matrix(p Plan, start time.Time, ops []Op, links map[string]LinkKind) FaultMatrix {
	type rowKey struct {
		kind Kind
		link LinkKind
	}
	rows := map[rowKey]*MatrixRow{}
	row := func(k rowKey) *MatrixRow {
		if rows[k] == nil {
			rows[k] = &MatrixRow{Kind: k.kind, Link: k.link, Answers: map[string]int{}}
		}
		return rows[k]
	}
	keyOf := func(f Fault) rowKey {
		if f.Kind.Wire() {
			return rowKey{f.Kind, links[f.Target]}
		}
		return rowKey{kind: f.Kind}
	}
	for _, f := range p.Faults {
		row(keyOf(f)).Faults++
	}
	end := start.Add(p.Duration)
	quiet := row(rowKey{})
	for _, op := range ops {
		opEnd := op.End
		if opEnd.IsZero() {
			opEnd = op.Start
		}
		if op.Start.After(end) {
			continue
		}
		met := map[rowKey]bool{}
		for _, f := range p.Faults {
			from := start.Add(f.At)
			if !opEnd.Before(from) && !op.Start.After(from.Add(f.For)) {
				met[keyOf(f)] = true
			}
		}
		if len(met) == 0 {
			quiet.Ops++
			quiet.Answers[outcomeOf(op)]++
		}
		for k := range met {
			r := row(k)
			r.Ops++
			r.Answers[outcomeOf(op)]++
		}
	}
	var m FaultMatrix
	for _, r := range rows {
		m.Rows = append(m.Rows, *r)
	}
	slices.SortFunc(m.Rows, func(a, b MatrixRow) int { return rowRank(a) - rowRank(b) })
	return m
}

// linkOrder is the order of the link columns in a matrix's rows.
var linkOrder = []LinkKind{DBLink, ProviderLink, RedisLink, WebhookLink, MerchantLink}

// rowRank orders rows: wire kinds by link kind, then process kinds, then
// the row of no fault.
func rowRank(r MatrixRow) int {
	if r.Kind == "" {
		return 1 << 20
	}
	if i := slices.Index(WireKinds, r.Kind); i >= 0 {
		l := slices.Index(linkOrder, r.Link)
		if l < 0 {
			l = len(linkOrder) // a link of no known kind comes last
		}
		return i*(len(linkOrder)+1) + l
	}
	return 1<<10 + slices.Index(ProcessKinds, r.Kind)
}

// Markdown renders the matrix as a Markdown table: one row per fault kind
// and link kind, the number of faults, the requests that overlapped them
// and those requests' answers by outcome.
func (m FaultMatrix) Markdown() string {
	var b strings.Builder
	b.WriteString("| fault | link | faults | requests | " + strings.Join(Outcomes, " | ") + " |\n")
	b.WriteString("|---|---|--:|--:|" + strings.Repeat("--:|", len(Outcomes)) + "\n")
	for _, r := range m.Rows {
		fault, link := string(r.Kind), string(r.Link)
		switch {
		case r.Kind == "":
			fault, link = "no fault", "—"
		case !r.Kind.Wire():
			link = "process"
		case link == "":
			link = "?"
		}
		faults := fmt.Sprint(r.Faults)
		if r.Kind == "" {
			faults = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |", fault, link, faults, r.Ops)
		for _, o := range Outcomes {
			fmt.Fprintf(&b, " %d |", r.Answers[o])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
