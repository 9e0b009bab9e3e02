package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

// tileValue is the data-value of the overview's tile named key.
func (b *shopper) tileValue(key string) string {
	return b.attr(fmt.Sprintf(`#tiles [data-tile="%s"]`, key), "value")
}

// barSum adds up the values of the bars of key in the chart svg, and
// counts those drawn with no height.
func (b *shopper) barSum(svg, key string) (sum int, flat int) {
	b.t.Helper()
	v, err := eval[[]int](b, fmt.Sprintf(`(() => { const bars = [...document.querySelectorAll('#%s rect[data-key="%s"]')];
		return [bars.reduce((s, r) => s + Number(r.dataset.value), 0), bars.filter((r) => !(r.getBBox().height > 0)).length]; })()`, svg, key))
	if err != nil || len(v) != 2 {
		b.t.Fatalf("bars of %s in %s: %v %v", key, svg, v, err)
	}
	return v[0], v[1]
}

// TestConsoleOverviewWithData: three payments paid (60.00 USD), two
// declined, one whose outcome is unknown and one refund of 4.00, some of
// the attempts moved back 5 and 11 hours: the
// overview's tiles say so (a success rate of 60 %, the oldest unknown
// outcome with a link to its order), and the charts have bars adding up
// to the same counts, each in its hour. A payment made while the page is open shows up
// without a reload; the window chooser asks for an hour and a week; with
// no data the charts still draw their axes and say so.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps the screenshot the README shows.
func TestConsoleOverviewWithData(t *testing.T) {
	chromium(t) // skip or fail once, here, not per database
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect), withEnv(env{"PAYD_LEASE": "10m"}), tuned(silentSandbox))
		p := newTap(t, s.base)

		// Nothing yet: the charts draw their axes and say there is nothing.
		b := consoleFor(t, s, p, 1280, true)
		b.waitFor("the empty overview", func() bool { return b.tileValue("paid") == "0" })
		for _, svg := range []string{"chart-payments", "chart-refunds"} {
			if n := b.count(fmt.Sprintf(`#%s rect`, svg)); n != 0 {
				t.Errorf("%s with no data has %d bars, want none", svg, n)
			}
			if got, _ := eval[string](b, fmt.Sprintf(`document.querySelector('#%s .empty')?.textContent ?? ''`, svg)); !strings.HasPrefix(got, "No ") {
				t.Errorf("%s with no data says %q, want that there is none", svg, got)
			}
			if n := b.count(fmt.Sprintf(`#%s line.axis`, svg)); n < 2 {
				t.Errorf("%s with no data draws %d axis lines, want its axes", svg, n)
			}
		}
		if got := b.tileValue("success"); got != "—" {
			t.Errorf("success rate with no payment = %q, want —", got)
		}
		if got := b.tileValue("oldest"); got != "none" {
			t.Errorf("oldest unknown with none = %q, want none", got)
		}

		_, tok := s.register("overview-console@example.com")
		var paid []string
		for _, amount := range []string{"10.00", "20.00", "30.00"} {
			paid = append(paid, s.paidOrder(tok, amount))
		}
		if r := s.pay(tok, s.order(tok, "5.00"), uuid.NewString(), "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay pm_declined = %d %s, want 402", r.Status, r.Body)
		}
		// Spread over the day: one payment paid 11 hours ago, one paid and
		// one declined 5 hours ago (their attempts' creation moved back).
		declined := s.order(tok, "5.00")
		if r := s.pay(tok, declined, uuid.NewString(), "pm_declined"); r.Status != http.StatusPaymentRequired {
			t.Fatalf("pay pm_declined = %d %s, want 402", r.Status, r.Body)
		}
		at5, at11 := time.Now().Add(-5*time.Hour), time.Now().Add(-11*time.Hour)
		for order, at := range map[string]time.Time{paid[1]: at5, declined: at5, paid[2]: at11} {
			s.exec("UPDATE payment_attempts SET created_at = ? WHERE order_id = ?", sqlTime(at), order)
		}
		unknown := s.order(tok, "7.00")
		if r := s.pay(tok, unknown, uuid.NewString(), "pm_timeout"); r.Status != http.StatusAccepted {
			t.Fatalf("pay pm_timeout = %d %s, want 202", r.Status, r.Body)
		}
		if r := s.refund(paid[0], uuid.NewString(), "4.00"); r.Status != http.StatusOK {
			t.Fatalf("refund 4.00 = %d %s, want 200", r.Status, r.Body)
		}

		// No reload: the poll brings them in.
		b.waitFor("the overview with data", func() bool { return b.tileValue("paid") == "3" && b.tileValue("refunds") == "1" })
		for key, want := range map[string]string{"paid": "3", "declined": "2", "unknown": "1", "refunds": "1", "success": "60 %", "discrepancies": "0", "disputes": "0"} {
			if got := b.tileValue(key); got != want {
				t.Errorf("tile %s = %q, want %q", key, got, want)
			}
		}
		if got := b.text(`#tiles [data-tile="paid"] [data-currency="USD"]`); got != "60.00 USD" {
			t.Errorf("the paid tile's USD charged reads %q, want 60.00 USD", got)
		}
		if got := b.text(`#tiles [data-tile="refunds"] [data-currency="USD"]`); got != "4.00 USD" {
			t.Errorf("the refunds tile's USD refunded reads %q, want 4.00 USD", got)
		}
		oldest := `#tiles [data-tile="oldest"]`
		if b.count(fmt.Sprintf(`%s .idref[data-id="%s"] button.open-order`, oldest, unknown)) != 1 {
			t.Errorf("the oldest unknown tile reads %q, want a link to order %s", b.text(oldest), unknown)
		}
		if got := b.tileValue("oldest"); !strings.HasSuffix(got, " s") && !strings.HasSuffix(got, " min") {
			t.Errorf("the oldest unknown's age = %q, want seconds or minutes", got)
		}
		for key, want := range map[string]int{"paid": 3, "declined": 2, "unknown": 1} {
			if sum, flat := b.barSum("chart-payments", key); sum != want || flat != 0 {
				t.Errorf("payments chart: %s bars add up to %d (%d without height), want %d", key, sum, flat, want)
			}
		}
		bar := func(key string, at time.Time) string {
			return b.attr(fmt.Sprintf(`#chart-payments rect[data-key="%s"][data-start="%s"]`, key, stamp(at.Truncate(time.Hour))), "value")
		}
		if p5, d5, p11 := bar("paid", at5), bar("declined", at5), bar("paid", at11); p5 != "1" || d5 != "1" || p11 != "1" {
			t.Errorf("bars 5 hours ago = %q paid, %q declined, 11 hours ago %q paid; want 1 each", p5, d5, p11)
		}
		if sum, flat := b.barSum("chart-refunds", "refunds"); sum != 1 || flat != 0 {
			t.Errorf("refunds chart: bars add up to %d (%d without height), want 1", sum, flat)
		}
		for _, svg := range []string{"chart-payments", "chart-refunds"} {
			if n := b.count(fmt.Sprintf(`#%s .empty`, svg)); n != 0 {
				t.Errorf("%s with data still says it has none", svg)
			}
			if got, _ := eval[string](b, fmt.Sprintf(`document.getElementById('%s-title')?.textContent ?? ''`, svg)); got == "" {
				t.Errorf("%s has no title", svg)
			}
		}
		if got, _ := eval[string](b, `document.getElementById('chart-payments-desc').textContent`); !strings.HasPrefix(got, "3 paid, 2 declined, 1 unknown") {
			t.Errorf("the payments chart's description = %q, want the counts", got)
		}
		if _, err := eval[bool](b, `(document.activeElement?.blur(), true)`); err != nil {
			t.Fatal(err)
		}
		b.shot("console-overview", "#overview")

		// Live: a payment made now shows without a reload.
		s.paidOrder(tok, "15.00")
		b.waitFor("the new payment on the overview", func() bool { return b.tileValue("paid") == "4" })
		if sum, _ := b.barSum("chart-payments", "paid"); sum != 4 {
			t.Errorf("after one more payment the paid bars add up to %d, want 4", sum)
		}

		// The window chooser: the last hour, then the last week by day.
		b.do("choose the last hour", chromedp.Click(`#window button[data-window="hour"]`))
		b.waitFor("the hour's overview", func() bool { return strings.HasPrefix(b.attr("#overview", "loaded"), "hour ") })
		if got := b.tileValue("paid"); got != "2" {
			t.Errorf("paid in the last hour = %q, want 2 (the others are 5 and 11 hours old)", got)
		}
		b.do("choose the last week", chromedp.Click(`#window button[data-window="week"]`))
		b.waitFor("the week's overview", func() bool { return strings.HasPrefix(b.attr("#overview", "loaded"), "week ") })
		if got := b.attr("#chart-payments", "drawn"); got != "8" {
			t.Errorf("buckets drawn for a week by day = %q, want 8 (the one holding from, and seven more)", got)
		}
		if sum, _ := b.barSum("chart-payments", "paid"); sum != 4 {
			t.Errorf("the week's paid bars add up to %d, want 4", sum)
		}
		stats := p.exchanges(func(x exchange) bool { return strings.HasPrefix(x.URI, "/v1/admin/stats?") })
		last := stats[len(stats)-1].URI
		if u, err := url.Parse(last); err != nil || u.Query().Get("bucket") != "day" || u.Query().Get("from") == "" || u.Query().Get("to") == "" {
			t.Errorf("the week's stats request = %s, want from, to and bucket=day", last)
		}

		// The oldest unknown outcome opens its order.
		b.do("open the oldest unknown", chromedp.Click(oldest+" button.open-order"))
		b.waitFor("its order", func() bool { return strings.HasPrefix(b.attr("#order", "loaded"), unknown+" ") })
		if got := b.attr(`#timeline li[data-kind="attempt"]`, "outcome"); got != "unknown" {
			t.Errorf("the oldest unknown's attempt on the timeline = %q, want unknown", got)
		}
		if !b.stayed() {
			t.Error("the page was reloaded")
		}
	})
}
