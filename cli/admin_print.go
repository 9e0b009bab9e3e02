package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payd/payd/client"
)

// The tables `payd admin` prints for people; -json prints payd's answer.

func table(w io.Writer, header string, rows func(tw io.Writer)) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	tw.Flush()
}

func adminStamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

func printCursor(w io.Writer, next *string) {
	if next != nil {
		fmt.Fprintf(w, "more: -cursor %s\n", *next)
	}
}

func printOrders(w io.Writer, page client.SearchPage) {
	if len(page.Data) == 0 {
		fmt.Fprintln(w, "no order matches")
		return
	}
	table(w, "ORDER\tSTATUS\tAMOUNT\tREFUNDED\tLAST ATTEMPT\tCUSTOMER\tCREATED", func(tw io.Writer) {
		for _, o := range page.Data {
			last := "-"
			if a := o.LastAttempt; a != nil {
				last = string(a.Status)
				if a.FailureCode != nil {
					last += " (" + *a.FailureCode + ")"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", o.Id, o.Status, o.Amount, o.Currency, o.RefundedAmount, last, deref(o.CustomerId), adminStamp(o.CreatedAt))
		}
	})
	printCursor(w, page.NextCursor)
}

// printTimeline prints an order, its books and its story, each entry with
// its outcome.
func printTimeline(w io.Writer, t client.Timeline) {
	o, m := t.Order, t.Order.Money
	fmt.Fprintf(w, "order     %s\nstatus    %s\namount    %s %s (refunded %s)\ncustomer  %s\ncreated   %s\n",
		o.Id, o.Status, o.Amount, o.Currency, o.RefundedAmount, deref(o.CustomerId), adminStamp(o.CreatedAt))
	fmt.Fprintf(w, "money     charged %s  refunded %s  disputed %s  lost %s  net %s %s\n\n",
		m.Charged, m.Refunded, m.Disputed, m.Lost, m.Net, o.Currency)
	table(w, "AT\tKIND\tOUTCOME\tSUMMARY\tID", func(tw io.Writer) {
		for _, e := range t.Timeline {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", adminStamp(e.At), e.Kind, outcomeOf(t, e), e.Summary, e.Id)
		}
	})
	printBooks(w, t)
	var open []client.Discrepancy
	for _, d := range t.Discrepancies {
		if d.Status == client.DiscrepancyStatusOpen {
			open = append(open, d)
		}
	}
	if len(open) > 0 {
		fmt.Fprintln(w, "\nopen discrepancies (payd admin discrepancies resolve ID -action apply|refund|ignore):")
		printDiscrepancies(w, open)
	}
}

// outcomeOf is what became of the record a timeline entry names, looked up
// in that record: the console (web/admin/timeline.js) shows the same.
func outcomeOf(t client.Timeline, e client.TimelineEntry) string {
	switch e.Kind {
	case "order":
		return "created"
	case "attempt":
		for _, a := range t.Attempts {
			if a.Id == e.Id {
				return string(a.Status)
			}
		}
	case "webhook":
		for _, ev := range t.WebhookEvents {
			if ev.Id == e.Id {
				return deref(ev.Outcome)
			}
		}
	case "refund":
		for _, r := range t.Refunds {
			if r.Id == e.Id {
				return string(r.Status)
			}
		}
	case "discrepancy":
		for _, d := range t.Discrepancies {
			if d.Id == e.Id {
				if d.Resolution != nil {
					return string(d.Status) + ": " + string(*d.Resolution)
				}
				return string(d.Status)
			}
		}
	case "ledger":
		return "booked" // an entry is appended once and never changes
	case "dispute":
		for _, d := range t.Disputes {
			if d.Id == e.Id {
				return string(d.Status)
			}
		}
	case "event":
		for _, ev := range t.Events {
			if ev.Id == e.Id {
				if ev.FannedOut {
					return "fanned out"
				}
				return "to fan out"
			}
		}
	case "audit":
		for _, a := range t.Audit {
			if a.Id == e.Id {
				out := fmt.Sprint(a.Result)
				if a.Code != nil {
					out += " " + *a.Code
				}
				if a.Replayed {
					out += " replayed"
				}
				return out
			}
		}
	}
	return "-"
}

func printRun(w io.Writer, r client.Run) {
	id := r.Id
	if r.DryRun {
		id = "dry run (nothing recorded)"
	}
	fmt.Fprintf(w, "run       %s\nsource    %s\nwindow    %s to %s\nmatched   %d\nfound     %d (%d new)\n",
		id, r.Source, adminStamp(r.From), adminStamp(r.To), r.Matched, r.Found, r.New)
	if len(r.Discrepancies) > 0 {
		fmt.Fprintln(w)
		printDiscrepancies(w, r.Discrepancies)
	}
}

func printRuns(w io.Writer, page client.RunPage) {
	if len(page.Data) == 0 {
		fmt.Fprintln(w, "no run yet")
		return
	}
	table(w, "RUN\tSOURCE\tFROM\tTO\tMATCHED\tFOUND\tNEW\tCREATED", func(tw io.Writer) {
		for _, r := range page.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Id, r.Source, adminStamp(r.From), adminStamp(r.To), r.Matched, r.Found, r.New, adminStamp(r.CreatedAt))
		}
	})
	printCursor(w, page.NextCursor)
}

func printDiscrepancies(w io.Writer, ds []client.Discrepancy) {
	if len(ds) == 0 {
		fmt.Fprintln(w, "no discrepancy")
		return
	}
	table(w, "DISCREPANCY\tTYPE\tSTATUS\tORDER\tREFERENCE\tPROVIDER\tPAYD\tRUN", func(tw io.Writer) {
		for _, d := range ds {
			status := string(d.Status)
			if d.Resolution != nil {
				status += ": " + string(*d.Resolution)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Id, d.Type, status, deref(d.OrderId), d.Reference,
				deref(d.ProviderAmount), deref(d.LocalAmount), strings.TrimSpace(deref(d.RunId)))
		}
	})
}

// printBooks prints the order's ledger and its disputes, oldest first.
func printBooks(w io.Writer, t client.Timeline) {
	fmt.Fprintln(w)
	if len(t.Ledger) == 0 {
		fmt.Fprintln(w, "no ledger entry")
	} else {
		table(w, "LEDGER\tKIND\tAMOUNT\tSOURCE\tAT\tCHARGE\tNOTE", func(tw io.Writer) {
			for _, e := range t.Ledger {
				source := string(e.Source)
				if e.Actor != nil {
					source += " (" + *e.Actor + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\n", e.Id, e.Kind, e.Amount, e.Currency, source, adminStamp(e.CreatedAt), e.ChargeId, e.Note)
			}
		})
	}
	if len(t.Disputes) == 0 {
		return
	}
	fmt.Fprintln(w)
	table(w, "DISPUTE\tSTATUS\tAMOUNT\tREASON\tCHARGE\tOPENED\tEVIDENCE DUE\tCLOSED", func(tw io.Writer) {
		for _, d := range t.Disputes {
			fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\n", d.Id, d.Status, d.Amount, d.Currency, d.Reason, d.ChargeId,
				adminStamp(d.OpenedAt), stampOr(d.EvidenceDueBy, "-"), stampOr(d.ClosedAt, "-"))
		}
	})
	for _, d := range t.Disputes {
		if d.ProviderUrl != nil {
			fmt.Fprintf(w, "answer %s at %s\n", d.Id, *d.ProviderUrl)
		}
	}
}

// printDisputes prints a page of disputes, newest first, with where each
// is answered at the provider.
func printDisputes(w io.Writer, ds []client.ListedDispute) {
	if len(ds) == 0 {
		fmt.Fprintln(w, "no dispute")
		return
	}
	table(w, "DISPUTE\tSTATUS\tAMOUNT\tREASON\tORDER\tOPENED\tEVIDENCE DUE\tCLOSED\tAT THE PROVIDER", func(tw io.Writer) {
		for _, d := range ds {
			fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Id, d.Status, d.Amount, d.Currency, d.Reason, d.OrderId,
				adminStamp(d.OpenedAt), stampOr(d.EvidenceDueBy, "-"), stampOr(d.ClosedAt, "-"), deref(d.ProviderUrl))
		}
	})
}

// stampOr is t as the admin tables show times, or none when t is nil.
func stampOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return adminStamp(*t)
}

// printStats prints the overview: a row per bucket, the totals, the money
// per currency and what is open now.
func printStats(w io.Writer, st client.Stats) {
	fmt.Fprintf(w, "window    %s to %s, by %s\n\n", adminStamp(st.From), adminStamp(st.To), st.Bucket)
	table(w, "BUCKET\tPAID\tDECLINED\tUNKNOWN\tREFUNDS", func(tw io.Writer) {
		for _, p := range st.Series {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", adminStamp(p.Start), p.Paid, p.Declined, p.Unknown, p.Refunds)
		}
		t := st.Totals
		fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\n", t.Paid, t.Declined, t.Unknown, t.Refunds)
	})
	rate := "- (nothing paid or declined)"
	if r := st.Totals.SuccessRate; r != nil {
		rate = fmt.Sprintf("%.1f%% (paid of paid and declined)", *r*100)
	}
	fmt.Fprintf(w, "\nsuccess rate        %s\n", rate)
	if len(st.Money) == 0 {
		fmt.Fprintln(w, "money               none booked")
	}
	for _, m := range st.Money {
		fmt.Fprintf(w, "money               %s charged %s, refunded %s\n", m.Currency, m.Charged, m.Refunded)
	}
	fmt.Fprintf(w, "open discrepancies  %d\nopen disputes       %d\n", st.OpenDiscrepancies, st.OpenDisputes)
	if o := st.OldestUnknown; o != nil {
		fmt.Fprintf(w, "oldest unknown      attempt %s of order %s, since %s (%s)\n",
			o.AttemptId, o.OrderId, adminStamp(o.Since), (time.Duration(o.AgeSeconds) * time.Second).String())
	} else {
		fmt.Fprintln(w, "oldest unknown      none")
	}
}
