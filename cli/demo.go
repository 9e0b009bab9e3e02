package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/payd/payd/app"
	"github.com/payd/payd/client"
)

// demoOptions are the flags of `payd demo`.
type demoOptions struct {
	url   string
	email string
}

// demoFlags are the flags of payd demo; -url defaults to PAYD_URL, as
// payd admin's does.
func demoFlags(getenv func(string) string) (*flag.FlagSet, *demoOptions) {
	o := &demoOptions{}
	fs := flag.NewFlagSet("payd demo", flag.ContinueOnError)
	app.URLVar(fs, &o.url, "url", paydURL(getenv), "PAYD_URL", "base URL of the running payd (PAYD_URL)")
	fs.StringVar(&o.email, "email", "", "email to register (default: a new demo-….@example.com at each run)")
	return fs, o
}

// demo is `payd demo`: the README's walkthrough, run against a live payd
// with nothing but the generated client and Go's HTTP client, so it works where curl scripts need
// tools a machine may lack. Every exchange is printed; a status other than
// the walkthrough's expected one ends the demo with an error.
func demo(ctx context.Context, args []string, getenv func(string) string, w io.Writer) error {
	fs, o := demoFlags(getenv)
	if err := parseFlags(fs, "demo", args, w); err != nil {
		return err
	}
	if err := checkBaseURL(fs, o.url); err != nil {
		return err
	}
	if o.email == "" {
		o.email = "demo-" + uuid.NewString()[:8] + "@example.com"
	}
	d := &demoRun{ctx: ctx, base: strings.TrimRight(o.url, "/"), w: w, client: &http.Client{Timeout: 30 * time.Second}}
	server := d.base + "/" // as client.NewClient keeps it: paths resolve beneath it

	// The client's Email type refuses to encode an address it finds
	// malformed; the demo sends -email as given and shows payd's answer.
	body, raw := jsonBody(map[string]string{"email": o.email, "name": "Ada Demo"})
	regKey := uuid.NewString()
	req, err := client.NewRegisterCustomerRequestWithBody(server, &client.RegisterCustomerParams{IdempotencyKey: &regKey}, "application/json", body)
	reg, err := d.exchange("register", req, err, raw, http.StatusCreated)
	if err != nil {
		return err
	}
	var customer client.Registration
	if err := json.Unmarshal(reg.body, &customer); err != nil || customer.Token == "" {
		return fmt.Errorf("demo: the registration answer holds no token: %s", reg.body)
	}
	d.token = customer.Token

	// A buyer names what to buy, never its price: payd prices it from the
	// merchant's catalogue.
	req, err = client.NewListProductsRequest(server, &client.ListProductsParams{})
	cat, err := d.exchange("read the catalogue", req, err, nil, http.StatusOK)
	if err != nil {
		return err
	}
	sku, err := demoProduct(cat.body)
	if err != nil && getenv("PAYD_MERCHANT_KEY") != "" {
		sku, err = d.stock(server, getenv("PAYD_MERCHANT_KEY"))
	}
	if err != nil {
		return err
	}
	body, raw = jsonBody(client.CreateOrderJSONRequestBody{Items: []client.ItemRequest{{Sku: &sku, Quantity: 2}}})
	req, err = client.NewCreateOrderRequestWithBody(server, &client.CreateOrderParams{}, "application/json", body)
	ord, err := d.exchange("create an order", req, err, raw, http.StatusCreated)
	if err != nil {
		return err
	}
	var order client.Order
	if err := json.Unmarshal(ord.body, &order); err != nil || order.Id == "" {
		return fmt.Errorf("demo: the order answer holds no id: %s", ord.body)
	}

	key := uuid.NewString()
	pay := func(step string) (demoReply, error) {
		body, raw := jsonBody(client.PayOrderJSONRequestBody{PaymentMethod: "pm_ok"})
		req, err := client.NewPayOrderRequestWithBody(server, order.Id, &client.PayOrderParams{IdempotencyKey: &key}, "application/json", body)
		return d.exchange(step, req, err, raw, http.StatusOK)
	}
	first, err := pay("pay")
	if err != nil {
		return err
	}
	again, err := pay("pay again with the same key: the same answer, no second charge")
	if err != nil {
		return err
	}
	if again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.body, again.body) {
		return fmt.Errorf("demo: the repeated payment was not replayed (Idempotent-Replayed %q)", again.header.Get("Idempotent-Replayed"))
	}
	req, err = client.NewGetRequestRequest(server, key)
	if _, err := d.exchange("what became of the payment request", req, err, nil, http.StatusOK); err != nil {
		return err
	}
	fmt.Fprintln(w, "done: the order is paid once; the repeated request got the stored answer.")
	return nil
}

// jsonBody is v as a request body, and its bytes to print.
func jsonBody(v any) (io.Reader, []byte) {
	raw, _ := json.Marshal(v)
	return bytes.NewReader(raw), raw
}

type demoRun struct {
	ctx    context.Context
	base   string
	token  string
	w      io.Writer
	client *http.Client
}

type demoReply struct {
	header http.Header
	body   []byte
}

// exchange sends one request the generated client built (raw is its body,
// nil for none), prints it and its answer, and checks the status. The
// customer token is shortened wherever it is printed.
func (d *demoRun) exchange(step string, req *http.Request, err error, raw []byte, want int) (demoReply, error) {
	if err != nil {
		return demoReply{}, fmt.Errorf("demo: %w", err)
	}
	req = req.WithContext(d.ctx)
	method, path := req.Method, strings.TrimPrefix(req.URL.RequestURI(), strings.TrimPrefix(d.base, req.URL.Scheme+"://"+req.URL.Host))
	fmt.Fprintf(d.w, "# %s\n> %s %s\n", step, method, path)
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
		fmt.Fprintf(d.w, "> Authorization: Bearer %s\n", shortToken(d.token))
	}
	if key := req.Header.Get("Idempotency-Key"); key != "" {
		fmt.Fprintf(d.w, "> Idempotency-Key: %s\n", key)
	}
	if raw != nil {
		fmt.Fprintf(d.w, "> %s\n", raw)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return demoReply{}, fmt.Errorf("demo: %s %s: %w (is payd running at %s? start it with `payd serve`)", method, path, err, shownBase(d.base))
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return demoReply{}, fmt.Errorf("demo: %s %s: %w", method, path, err)
	}
	shown := string(bytes.TrimSpace(got))
	var t struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(got, &t) == nil && t.Token != "" {
		shown = strings.ReplaceAll(shown, t.Token, shortToken(t.Token))
	}
	fmt.Fprintf(d.w, "< %s\n", resp.Status)
	if r := resp.Header.Get("Idempotent-Replayed"); r != "" {
		fmt.Fprintf(d.w, "< Idempotent-Replayed: %s\n", r)
	}
	fmt.Fprintf(d.w, "< %s\n\n", shown)
	if resp.StatusCode != want {
		return demoReply{}, fmt.Errorf("demo: %s answered %d, want %d", step, resp.StatusCode, want)
	}
	return demoReply{header: resp.Header, body: got}, nil
}

// shortToken keeps a token out of the demo's output, beyond its start.
func shortToken(tok string) string {
	if len(tok) <= 8 {
		return "…"
	}
	return tok[:8] + "…"
}

// stock puts green tea in an empty catalogue with the merchant's key
// (PAYD_MERCHANT_KEY), as the merchant's server would: the buyer cannot.
func (d *demoRun) stock(server, merchantKey string) (string, error) {
	body, raw := jsonBody(client.CreateProductRequest{Sku: "demo-tea", Name: "Green tea", UnitPrice: "4.95", Currency: "USD"})
	key := "demo-product-tea"
	req, err := client.NewCreateProductRequestWithBody(server, &client.CreateProductParams{IdempotencyKey: &key}, "application/json", body)
	buyer := d.token
	d.token = merchantKey // this one exchange is the merchant's
	defer func() { d.token = buyer }()
	if _, err := d.exchange("the merchant's server puts green tea in the catalogue (PAYD_MERCHANT_KEY)", req, err, raw, http.StatusCreated); err != nil {
		return "", err
	}
	return "demo-tea", nil
}

// demoProduct picks the product the demo buys: the catalogue's first
// with stock to sell.
func demoProduct(page []byte) (string, error) {
	var list client.ProductList
	if err := json.Unmarshal(page, &list); err != nil {
		return "", fmt.Errorf("demo: the catalogue answer is not a product list: %s", page)
	}
	for _, p := range list.Data {
		if p.Stock == nil || *p.Stock >= 2 {
			return p.Sku, nil
		}
	}
	return "", errors.New("demo: the catalogue has nothing to sell; add a product first: payd merchant products create SKU -name N -price P -currency C")
}
