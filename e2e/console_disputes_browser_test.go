package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// disputeCard is a dispute of the console's disputes list as shown.
type disputeCard struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Order  string `json:"order"`
	Badge  string `json:"badge"`
	Amount string `json:"amount"`
	Reason string `json:"reason"`
	Due    string `json:"due"`
	Tone   string `json:"tone"` // the due line's classes
	Opened string `json:"opened"`
	Closed string `json:"closed"`
	Href   string `json:"href"`   // the link to the dispute at the provider
	Target string `json:"target"` // and how it opens
	Rel    string `json:"rel"`
}

// pick picks value in the select sel, as a person does: the page hears
// its change.
func (b *shopper) pick(sel, value string) {
	b.t.Helper()
	if _, err := eval[bool](b, fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q;
		s.dispatchEvent(new Event('change', { bubbles: true })); return true; })()`, sel, value)); err != nil {
		b.t.Fatalf("choose %q in %s: %v", value, sel, err)
	}
}

func (b *shopper) disputeCards() []disputeCard {
	b.t.Helper()
	cards, err := eval[[]disputeCard](b, `[...document.querySelectorAll('#dp-list > li')].map((c) => {
  const a = c.querySelector('a.provider');
  const text = (sel) => c.querySelector(sel)?.innerText.trim() ?? '';
  return { id: c.dataset.id, status: c.dataset.status, order: c.dataset.order, badge: text('.badge'),
    amount: text('.amount'), reason: text('.reason'), due: text('.due').replace(/^evidence due /, ''),
    tone: c.querySelector('.due')?.className ?? '', opened: text('.opened'), closed: text('.closed'),
    href: a ? a.href : '', target: a ? a.target : '', rel: a ? a.rel : '' };
})`)
	if err != nil {
		b.t.Fatalf("read the disputes list: %v", err)
	}
	return cards
}

// TestConsoleShowsDisputes: two paid orders disputed at the sandbox, one
// of them won. The overview's "Open disputes" tile says 1 and leads to the
// disputes, open ones listed: the dispute's ID at the provider linked to
// its record there (a new tab, no opener), its order (which opens), its
// amount, reason and status, when its evidence is due (the provider's
// date, seven days after it opened, with the days left) and "not decided".
// The status filter shows the won one, and any shows both; the open
// order's dispute card says when the evidence is due and links to the
// provider too. How the due date reads (overdue, hours left, no date, a
// decided dispute's plain date) is checked on the page's own function.
//
// PAYD_TEST_SCREENSHOT_DIR=docs keeps the screenshot docs/console.md shows.
func TestConsoleShowsDisputes(t *testing.T) {
	chromium(t)
	s := start(t, on("sqlite"), withEnv(env{"PAYD_LEASE": "10m"}))
	_, tok := s.register("disputes-console@example.com")
	first, second := s.order(tok, "10.00"), s.order(tok, "12.50")
	for _, o := range []string{first, second} {
		if r := s.pay(tok, o, uuid.NewString(), "pm_dispute"); r.Status != http.StatusOK {
			t.Fatalf("pay pm_dispute = %d %s, want 200", r.Status, r.Body)
		}
	}
	type page struct {
		Data []client.ListedDispute `json:"data"`
	}
	var all page
	eventually(t, 10*time.Second, "both disputes opened in payd", func() bool {
		all = decode[page](t, s.admin("GET", "/v1/admin/disputes", "", nil))
		return len(all.Data) == 2
	})
	open, won := all.Data[0], all.Data[1] // newest first: the second order's stays open
	if _, err := s.sandbox.CloseDispute(t.Context(), won.Id, domain.DisputeWon); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the first dispute won in payd", func() bool {
		return len(decode[page](t, s.admin("GET", "/v1/admin/disputes?status=open", "", nil)).Data) == 1
	})
	if open.ProviderUrl == nil || open.EvidenceDueBy == nil || won.ProviderUrl == nil {
		t.Fatalf("disputes = %+v, want each with a provider URL and an evidence date", all.Data)
	}

	p := newTap(t, s.base)
	b := consoleFor(t, s, p, 1280, true)
	b.waitFor("the overview's open disputes", func() bool { return b.tileValue("disputes") == "1" })
	if got := b.text(`#tiles [data-tile="disputes"] button`); got != "answer them" {
		t.Errorf("the open disputes tile's button reads %q, want \"answer them\"", got)
	}
	if _, err := eval[bool](b, `(window.scrollTo(0, 0), true)`); err != nil {
		t.Fatal(err)
	}
	b.do("press the tile's button", chromedp.Click(`#tiles [data-tile="disputes"] button`))
	b.waitFor("the disputes under the bar", func() bool { return b.underBar("disputes-section") })
	if nav := b.nav(); nav.Focus != "dp-h" || len(nav.Current) != 1 || nav.Current[0] != "disputes-section" {
		t.Errorf("after the tile's button the bar is %+v, want Disputes marked and its heading focused", nav)
	}
	b.waitFor("the open dispute listed", func() bool { return b.attr("#dp-list", "loaded") == "1" })

	cards := b.disputeCards()
	if len(cards) != 1 {
		t.Fatalf("open disputes listed = %+v, want one", cards)
	}
	c := cards[0]
	due := regexp.MustCompile(`^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC) · 6 days left$`)
	wantDue := open.EvidenceDueBy.UTC().Format("2006-01-02 15:04:05") + " UTC"
	if c.ID != open.Id || c.Status != "open" || c.Order != second || c.Badge != "open" || c.Amount != "12.50 USD" ||
		c.Reason != "fraudulent" || !shownTime.MatchString(c.Opened) || c.Closed != "not decided" {
		t.Errorf("the open dispute's card = %+v, want %s of order %s: open, 12.50 USD, fraudulent, not decided", c, open.Id, second)
	}
	if m := due.FindStringSubmatch(c.Due); m == nil || m[1] != wantDue || c.Tone != "meta due" {
		t.Errorf("evidence due reads %q (%q), want %q and 6 days left, not yet in the bad colour (seven days after it opened, less the seconds since)", c.Due, c.Tone, wantDue)
	}
	if c.Href != *open.ProviderUrl || c.Target != "_blank" || c.Rel != "noopener noreferrer" {
		t.Errorf("the provider link = %q (target %q, rel %q), want %q in a new tab without an opener", c.Href, c.Target, c.Rel, *open.ProviderUrl)
	}
	// The link leads to the provider's own record of this dispute.
	resp, err := http.Get(c.Href)
	if err != nil {
		t.Fatal(err)
	}
	var atProvider struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	err = json.NewDecoder(resp.Body).Decode(&atProvider)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || atProvider.ID != open.Id || atProvider.Status != "open" {
		t.Errorf("GET %s = %d %+v (%v), want the provider's open dispute %s", c.Href, resp.StatusCode, atProvider, err, open.Id)
	}

	b.pick("#dp-status", "won")
	b.waitFor("the won dispute listed", func() bool {
		c := b.disputeCards()
		return len(c) == 1 && c[0].ID == won.Id
	})
	if c := b.disputeCards()[0]; c.Status != "won" || c.Badge != "won" || !shownTime.MatchString(c.Closed) || !shownTime.MatchString(c.Due) {
		t.Errorf("the won dispute's card = %+v, want won, closed at a time, and its evidence date alone", c)
	}
	b.pick("#dp-status", "")
	b.waitFor("both disputes listed", func() bool { return len(b.disputeCards()) == 2 })
	b.shot("console-disputes", "#disputes-section")

	// Its order opens from the card, and the order's own card says the same.
	b.do("open the disputed order", chromedp.Click(`#dp-list li[data-id="`+open.Id+`"] .open-order`))
	b.waitFor("the order's dispute card", func() bool { return b.displayed("#disputes-box") && b.attr("#disputes .dispute", "id") == open.Id })
	card := b.text("#disputes .dispute")
	if !strings.Contains(card, "evidence due: "+wantDue+" · 6 days left") || !strings.Contains(card, "answer at the provider") {
		t.Errorf("the order's dispute card reads %q, want its evidence date with the days left and a link to answer it", card)
	}
	if href, _ := eval[string](b, `document.querySelector('#disputes .dispute a.provider')?.href ?? ''`); href != *open.ProviderUrl {
		t.Errorf("the order's dispute links to %q, want %q", href, *open.ProviderUrl)
	}

	// How a due date reads, by the page's own function, at a fixed now.
	type dueView struct {
		Text string `json:"text"`
		Tone string `json:"tone"`
	}
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]dueView](`import('/admin/disputes.js').then((m) => {
  const now = Date.parse('2026-12-05T12:00:00Z');
  return [
    { status: 'open', evidence_due_by: '2026-12-05T11:00:00.000000Z' },
    { status: 'open', evidence_due_by: '2026-12-05T17:30:00.000000Z' },
    { status: 'open', evidence_due_by: '2026-12-07T12:00:00.000000Z' },
    { status: 'open', evidence_due_by: '2026-12-12T12:00:00.000000Z' },
    { status: 'open', evidence_due_by: null },
    { status: 'lost', evidence_due_by: '2026-12-01T12:00:00.000000Z' },
  ].map((d) => m.dueOf(d, now));
})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := []dueView{
		{"2026-12-05 11:00:00 UTC · overdue", "bad-text"},
		{"2026-12-05 17:30:00 UTC · 5 h left", "bad-text"},
		{"2026-12-07 12:00:00 UTC · 2 days left", "bad-text"},
		{"2026-12-12 12:00:00 UTC · 7 days left", ""},
		{"no date named", "none"},
		{"2026-12-01 12:00:00 UTC", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("dueOf = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("dueOf case %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if !b.stayed() {
		t.Error("the disputes view reloaded the page")
	}
	for _, x := range p.exchanges(nil) {
		if strings.Contains(x.URI, "disputes") && x.Method != "GET" {
			t.Errorf("the console sent %s %s: the disputes view only reads", x.Method, x.URI)
		}
	}
}
