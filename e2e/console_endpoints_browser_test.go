package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleDeliveryLog: the console lists the shop's endpoints, shows an
// endpoint's delivery log with each request and answer (a 500, then the
// 2xx), and redelivers an event, which reaches the shop again under the
// same webhook-id.
func TestConsoleDeliveryLog(t *testing.T) {
	chromium(t)
	rcv := startReceiver(t, notifySecret, 1)
	s := start(t, withEnv(notifyEnv(rcv)))
	p := newTap(t, s.base)
	b := &shopper{t: t, s: s, tap: p, ctx: newBrowser(t)}
	b.do("widen the window", chromedp.EmulateViewport(1280, 900))

	_, tok := s.register(newEmail())
	order := s.paidOrder(tok, "5.00")
	var ev []eventRow
	b.waitFor("the event recorded by the shop after one 500", func() bool {
		ev = eventsOf(t, s.db, order)
		return len(ev) == 1 && rcv.events()[ev[0].ID].OrderID == order && deliveryOf(t, s.db, ev[0].ID).Status == "delivered"
	})

	b.do("open the console", chromedp.Navigate(p.srv.URL+"/admin"))
	b.waitState("signed-out")
	b.do("sign in", chromedp.SendKeys("#token", testAdminToken), chromedp.Click("#sign-in-button"))
	b.waitState("ready")
	b.waitFor("the endpoint from PAYD_NOTIFY_URL", func() bool { return b.count(`#ep-list li[data-status="enabled"]`) == 1 })
	if !strings.Contains(b.text("#ep-list"), rcv.url) {
		t.Errorf("the endpoint list shows %q, want the receiver's URL", b.text("#ep-list"))
	}
	b.do("open its delivery log", chromedp.Click(`#ep-list li .deliveries`))
	card := fmt.Sprintf(`#ep-deliveries li[data-event="%s"]`, ev[0].ID)
	b.waitFor("the delivery in the log", func() bool { return b.attr(card, "status") == "delivered" })
	if n := b.count(card + " .attempts li"); n != 2 {
		t.Errorf("the delivery shows %d attempts, want 2 (500, then 204)", n)
	}
	if got := b.attr(card+` .attempts li[data-n="1"]`, "status"); got != "500" {
		t.Errorf("attempt 1 shows status %q, want 500", got)
	}
	b.do("redeliver", chromedp.Click(card+" .redeliver"))
	b.waitFor("the shop to get the event again", func() bool { return len(arrivalsOf(rcv.arrivals(), ev[0].ID)) == 3 })
	b.waitFor("the log to show the third attempt", func() bool {
		b.do("reload the endpoints", chromedp.Click("#ep-refresh"))
		return b.count(card+" .attempts li") == 3 && b.attr(card, "status") == "delivered"
	})
	if n := rcv.printed(ev[0].ID); n != 1 {
		t.Errorf("the shop printed the event %d times, want once (it dedupes on webhook-id)", n)
	}
}
