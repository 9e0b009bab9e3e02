package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// examples/shop, the merchant's server, run as an OS process against a
// payd on SQLite with the sandbox: its catalogue reaches payd, its page's
// API creates an order with the merchant key and hands back the client
// secret, the pay with that secret goes through, and payd's signed
// order.paid reaches it.

// shopBinary is examples/shop, built once per test binary.
var shopBinary struct {
	once sync.Once
	path string
	err  error
}

func shopExecutable(t *testing.T) string {
	t.Helper()
	shopBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "payd-shop-")
		if err != nil {
			shopBinary.err = err
			return
		}
		shopBinary.path = filepath.Join(dir, "shop")
		if out, err := exec.Command("go", "build", "-o", shopBinary.path, "../examples/shop").CombinedOutput(); err != nil {
			shopBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if shopBinary.err != nil {
		t.Fatalf("build the shop: %v", shopBinary.err)
	}
	return shopBinary.path
}

// shopProc is one running shop.
type shopProc struct {
	t      *testing.T
	base   string      // http://addr
	out    *syncBuffer // what it printed after "listening on"
	stderr *syncBuffer
	cmd    *exec.Cmd
	exited chan struct{}
}

// startShop runs the shop on addr against the payd at paydURL, with the
// tests' merchant key and notify secret, and waits until its catalogue is
// in payd.
func startShop(t *testing.T, addr, paydURL string) *shopProc {
	t.Helper()
	cmd := exec.Command(shopExecutable(t))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYD_") && !strings.HasPrefix(kv, "SHOP_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PAYD_URL="+paydURL, "PAYD_MERCHANT_KEY="+testMerchantKey,
		"PAYD_NOTIFY_SECRET="+notifySecret, "SHOP_ADDR="+addr)
	sh := &shopProc{t: t, out: &syncBuffer{}, stderr: &syncBuffer{}, cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = sh.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = sh.out.Write([]byte(sc.Text() + "\n"))
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(sh.exited) }()
	t.Cleanup(func() {
		sh.stop()
		if t.Failed() {
			t.Logf("shop printed:\n%s\nstderr:\n%s", tail(sh.out.String(), 20), tail(sh.stderr.String(), 20))
		}
	})
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				<-sh.exited
				t.Fatalf("the shop exited (%v) before its catalogue was in payd:\n%s", cmd.ProcessState, sh.stderr.String())
			}
			if a, ok := strings.CutPrefix(line, "listening on "); ok {
				sh.base = a
			}
			if strings.HasPrefix(line, "catalogue in payd: ") {
				return sh
			}
		case <-deadline:
			t.Fatalf("the shop's catalogue was not in payd within a minute:\n%s", sh.stderr.String())
		}
	}
}

// stop ends the shop as an operator would, and expects a clean exit.
func (sh *shopProc) stop() {
	select {
	case <-sh.exited:
		return
	default:
	}
	_ = sh.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sh.exited:
		if !sh.cmd.ProcessState.Success() {
			sh.t.Errorf("the shop exited with %v after SIGTERM, want a clean exit", sh.cmd.ProcessState)
		}
	case <-time.After(30 * time.Second):
		_ = sh.cmd.Process.Kill()
		<-sh.exited
		sh.t.Errorf("the shop did not stop within 30s of SIGTERM")
	}
}

// call sends the page's request to the shop.
func (sh *shopProc) call(method, path string, body any, header http.Header) reply {
	sh.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			sh.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, sh.base+path, rd)
	if err != nil {
		sh.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		sh.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// shopOrder is an order as the shop's GET /api/orders/{id} shows it: what
// payd's events told it.
type shopOrder struct {
	ID     string   `json:"id"`
	Status string   `json:"status"`
	Events []string `json:"events"`
}

func (sh *shopProc) order(id string) shopOrder {
	sh.t.Helper()
	r := sh.call(http.MethodGet, "/api/orders/"+id, nil, nil)
	if r.Status != http.StatusOK {
		sh.t.Fatalf("the shop's order %s = %d %s", id, r.Status, r.Body)
	}
	return decode[shopOrder](sh.t, r)
}

// checkout is the page's "Create the order": the shop's answer.
type checkout struct {
	OrderID      string `json:"order_id"`
	ClientSecret string `json:"client_secret"`
	Amount       string `json:"amount"`
	Currency     string `json:"currency"`
}

func (sh *shopProc) checkout(items ...map[string]any) checkout {
	sh.t.Helper()
	r := sh.call(http.MethodPost, "/api/orders", map[string]any{"cart_id": uuid.NewString(), "items": items}, nil)
	if r.Status != http.StatusCreated {
		sh.t.Fatalf("checkout = %d %s, want 201", r.Status, r.Body)
	}
	return decode[checkout](sh.t, r)
}

// pay is the page's "Pay": through the shop, with the client secret.
func (sh *shopProc) pay(c checkout, method string) reply {
	sh.t.Helper()
	return sh.call(http.MethodPost, "/api/orders/"+c.OrderID+"/pay", map[string]string{"payment_method": method},
		http.Header{"Authorization": {"Bearer " + c.ClientSecret}, "Idempotency-Key": {uuid.NewString()}})
}

func line(sku string, n int) map[string]any { return map[string]any{"sku": sku, "quantity": n} }

// shopStack is payd on SQLite with the sandbox, telling the shop at addr
// of every order event, and the shop.
func shopStack(t *testing.T) (*stack, *shopProc) {
	t.Helper()
	addr := freeAddr(t)
	s := start(t, withEnv(env{"PAYD_NOTIFY_URL": "http://" + addr + "/webhooks/payd", "PAYD_NOTIFY_SECRET": notifySecret}))
	return s, startShop(t, addr, s.base)
}

// TestShop: the shop's catalogue is in payd, at the shop's prices and
// stock, and a restart neither duplicates nor fails; an order created
// through the shop is priced by payd from the catalogue and takes stock;
// the browser pays it with the client secret alone; payd's signed
// order.paid reaches the shop, which marks the order paid once; short
// stock reaches the page as payd's out_of_stock naming the SKU.
func TestShop(t *testing.T) {
	s, sh := shopStack(t)

	// The catalogue.
	want := map[string]product{
		"mug-stoneware": {Name: "Stoneware mug", UnitPrice: "12.00", Stock: ptrTo[int64](20)},
		"tea-green":     {Name: "Green tea, 100 g", UnitPrice: "4.95"},
		"notebook-a5":   {Name: "A5 notebook", UnitPrice: "8.50", Stock: ptrTo[int64](5)},
	}
	products := func() map[string]product {
		r := s.do(request{method: http.MethodGet, path: "/v1/products"})
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/products = %d %s", r.Status, r.Body)
		}
		out := map[string]product{}
		for _, p := range decode[struct{ Data []product }](t, r).Data {
			out[p.SKU] = p
		}
		return out
	}
	got := products()
	for sku, w := range want {
		p, ok := got[sku]
		if !ok || p.Name != w.Name || p.UnitPrice != w.UnitPrice || p.Currency != "USD" || !p.Active || fmt.Sprint(deref64(p.Stock)) != fmt.Sprint(deref64(w.Stock)) {
			t.Errorf("payd holds %s as %+v, want %+v in USD", sku, p, w)
		}
	}
	if n := s.productCount(); n != int64(len(want)) {
		t.Fatalf("payd holds %d products, want %d", n, len(want))
	}
	if n := s.auditRowsOf("create_product", http.StatusCreated); n != int64(len(want)) {
		t.Errorf("%d creations were audited 201, want %d", n, len(want))
	}

	// A restart: the same creations, replayed; nothing new, nothing refused.
	addr := strings.TrimPrefix(sh.base, "http://")
	sh.stop()
	sh = startShop(t, addr, s.base)
	if n := s.productCount(); n != int64(len(want)) {
		t.Fatalf("after a restart payd holds %d products, want %d", n, len(want))
	}
	if n := s.count(`audit_log WHERE action IN ('create_product', 'update_product') AND result <> 201`); n != 0 {
		t.Errorf("a restart of the shop made %d catalogue writes that were not replayed creations", n)
	}

	// An order through the shop: payd's price, the stock taken.
	c := sh.checkout(line("mug-stoneware", 2), line("tea-green", 1))
	if c.Amount != "28.95" || c.Currency != "USD" || !strings.HasPrefix(c.ClientSecret, c.OrderID+"_secret_") {
		t.Fatalf("checkout = %+v, want 28.95 USD and the order's client secret", c)
	}
	if st := products()["mug-stoneware"].Stock; st == nil || *st != 18 {
		t.Errorf("mug stock after the order = %v, want 18", deref64(st))
	}
	if o := sh.order(c.OrderID); o.Status != "pending" {
		t.Errorf("the shop's order before the pay = %+v, want pending", o)
	}

	// The client secret is the order's credential, and nothing else.
	if r := s.do(request{method: http.MethodGet, path: "/v1/orders/" + c.OrderID, token: c.ClientSecret}); r.Status != http.StatusOK {
		t.Errorf("GET the order with its client secret = %d %s, want 200", r.Status, r.Body)
	}
	if r := s.do(request{method: http.MethodGet, path: "/v1/orders", token: c.ClientSecret}); r.Status < 400 {
		t.Errorf("listing orders with a client secret = %d, want a refusal", r.Status)
	}

	// The pay, with the client secret, through the shop.
	if r := sh.pay(c, "pm_ok"); r.Status != http.StatusOK || r.json(t)["status"] != "paid" {
		t.Fatalf("pay = %d %s, want 200 paid", r.Status, r.Body)
	}
	eventually(t, 30*time.Second, "order.paid did not reach the shop", func() bool {
		return sh.order(c.OrderID).Status == "paid"
	})
	if o := sh.order(c.OrderID); len(o.Events) != 1 || o.Events[0] != "order.paid" {
		t.Errorf("the shop was told %v, want order.paid once", o.Events)
	}
	ev := eventsOf(t, s.db, c.OrderID)
	if len(ev) != 1 || ev[0].Type != "order.paid" {
		t.Fatalf("payd's events of the order = %+v, want order.paid", ev)
	}
	eventually(t, 10*time.Second, "the delivery is not recorded delivered", func() bool {
		return deliveryOf(t, s.db, ev[0].ID).Status == "delivered"
	})
	if n := strings.Count(sh.out.String(), ev[0].ID+" order.paid order "+c.OrderID+" is paid"); n != 1 {
		t.Errorf("the shop printed the event %d times, want once:\n%s", n, sh.out.String())
	}

	// Short stock: payd's 409 out_of_stock reaches the page, nothing taken.
	r := sh.call(http.MethodPost, "/api/orders", map[string]any{"cart_id": uuid.NewString(), "items": []any{line("notebook-a5", 6)}}, nil)
	if r.Status != http.StatusConflict || r.problemCode() != "out_of_stock" || r.json(t)["sku"] != "notebook-a5" {
		t.Errorf("six notebooks of five = %d %s, want 409 out_of_stock naming notebook-a5", r.Status, r.Body)
	}
	if st := products()["notebook-a5"].Stock; st == nil || *st != 5 {
		t.Errorf("notebook stock after a refused order = %v, want 5", deref64(st))
	}
}

// TestShopTamperedEvent: an order.paid for the shop's unpaid order,
// signed with another secret, or signed by payd's secret and then altered,
// is 401 at the shop and leaves the order pending; payd's own event, once
// the order is paid, is still acted on.
func TestShopTamperedEvent(t *testing.T) {
	_, sh := shopStack(t)
	c := sh.checkout(line("tea-green", 2))
	body := func(status string) []byte {
		b, _ := json.Marshal(map[string]any{"id": "evt-forged", "type": "order.paid", "created_at": stamp(time.Now()),
			"cause": map[string]string{"kind": "pay_request", "ref": "x"},
			"order": map[string]any{"id": c.OrderID, "status": status, "amount": c.Amount, "currency": "USD"}})
		return b
	}
	send := func(secret string, signedBody, sentBody []byte) int {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		sig, err := wh.Sign("evt-forged", now, signedBody)
		if err != nil {
			t.Fatal(err)
		}
		return sh.call(http.MethodPost, "/webhooks/payd", json.RawMessage(sentBody), http.Header{
			"Webhook-Id": {"evt-forged"}, "Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}).Status
	}
	if got := send("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo=", body("paid"), body("paid")); got != http.StatusUnauthorized {
		t.Errorf("an order.paid signed with another secret = %d, want 401", got)
	}
	if got := send(notifySecret, body("pending"), body("paid")); got != http.StatusUnauthorized {
		t.Errorf("a signed event altered after signing = %d, want 401", got)
	}
	if o := sh.order(c.OrderID); o.Status != "pending" || len(o.Events) != 0 {
		t.Fatalf("the shop's order after forged events = %+v, want pending and told nothing", o)
	}
	if strings.Contains(sh.out.String(), "evt-forged") {
		t.Errorf("the shop acted on a forged event:\n%s", sh.out.String())
	}
	// The genuine event still gets through.
	if r := sh.pay(c, "pm_ok"); r.Status != http.StatusOK {
		t.Fatalf("pay = %d %s", r.Status, r.Body)
	}
	eventually(t, 30*time.Second, "order.paid did not reach the shop", func() bool {
		return sh.order(c.OrderID).Status == "paid"
	})
}

func ptrTo[T any](v T) *T { return &v }

func deref64(p *int64) any {
	if p == nil {
		return "unlimited"
	}
	return *p
}

// auditRowsOf counts the audit rows of action with result.
func (s *stack) auditRowsOf(action string, result int) int64 {
	return s.count(`audit_log WHERE action = ? AND result = ?`, action, result)
}
