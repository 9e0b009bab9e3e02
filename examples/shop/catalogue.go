package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payd/payd/client"
)

// product is one product the shop sells, as it wants payd to hold it. payd
// holds the truth: the page shows payd's prices, and payd prices every
// order from them.
type product struct {
	SKU       string
	Name      string
	UnitPrice string // at the currency's full scale, as payd writes it
	Currency  string
	Stock     *int64 // at creation only; nil is unlimited
}

func stock(n int64) *int64 { return &n }

// catalogue is the shop's products. Change a name or a price here and
// restart: the next start PATCHes payd to match. Stock is set when a
// product is created and then lives in payd (orders take it; restock with
// `payd merchant products stock`): a restart does not reset it.
var catalogue = []product{
	{SKU: "mug-stoneware", Name: "Stoneware mug", UnitPrice: "12.00", Currency: "USD", Stock: stock(20)},
	{SKU: "tea-green", Name: "Green tea, 100 g", UnitPrice: "4.95", Currency: "USD"},
	{SKU: "notebook-a5", Name: "A5 notebook", UnitPrice: "8.50", Currency: "USD", Stock: stock(5)},
}

// payd is the shop's side of payd: the generated client, and the merchant
// key it sends on the calls only the merchant may make.
type payd struct {
	c           *client.ClientWithResponses
	merchantKey string
}

func newPayd(base, merchantKey string, opts ...client.ClientOption) (*payd, error) {
	c, err := client.NewClientWithResponses(base, opts...)
	if err != nil {
		return nil, err
	}
	return &payd{c: c, merchantKey: merchantKey}, nil
}

// asMerchant sends the merchant key. It is added call by call, not to
// every request of the client: the pay the shop passes on for the browser
// must carry the browser's client secret and nothing of the shop's.
func (p *payd) asMerchant(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+p.merchantKey)
	return nil
}

// refusal is a 4xx from payd that no retry changes: the shop stops and
// says why.
type refusal struct {
	what   string
	status int
	body   []byte
}

func (r *refusal) Error() string {
	return fmt.Sprintf("%s: payd answered %d %s", r.what, r.status, strings.TrimSpace(string(r.body)))
}

// answer classifies an answer that was not the one wanted: a 4xx other
// than 429 is a refusal; anything else (429, 5xx) may pass.
func answer(what string, status int, body []byte) error {
	if status >= 400 && status < 500 && status != http.StatusTooManyRequests {
		return &refusal{what: what, status: status, body: body}
	}
	return fmt.Errorf("%s: payd answered %d %s", what, status, strings.TrimSpace(string(body)))
}

// problemCode is the code of a problem+json body, "" for anything else.
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// contentHash is a short digest of what the shop wants a product to be:
// part of every idempotency key of its writes, so a changed product is a
// new intent (a new key) and an unchanged one is the same intent (a
// replay, however often the shop restarts).
func contentHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":" + p + ";"))
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

func (p product) hash() string {
	s := "unlimited"
	if p.Stock != nil {
		s = strconv.FormatInt(*p.Stock, 10)
	}
	return contentHash(p.SKU, p.Name, p.UnitPrice, p.Currency, s)
}

// createKey is the Idempotency-Key of a product's creation: the SKU and
// what it is created as.
func (p product) createKey() string { return "shop-create-" + p.SKU + "-" + p.hash() }

// updateKey is the Idempotency-Key of a PATCH bringing the product from
// what payd showed (seen: its updated_at, or "hidden") to what the shop
// wants. Both are in the key: a replayed PATCH is only ever the answer to
// the same change from the same state. A PATCH keyed by the wanted content
// alone would, after someone changed the product again, be replayed
// instead of done.
func (p product) updateKey(seen string) string {
	return "shop-update-" + p.SKU + "-" + contentHash(p.hash(), seen)
}

// syncCatalogue brings every product of the catalogue into payd.
func (s *shop) syncCatalogue(ctx context.Context) error {
	for _, p := range s.catalogue {
		if err := s.payd.ensureProduct(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// ensureProduct makes payd hold p: created if new, else changed to p's
// name and price and shown to buyers.
//
//  1. POST /v1/products under createKey. A fresh 201 is done.
//  2. A replayed 201 (the shop created it on an earlier start) or 409
//     sku_taken (it exists, created under another key: another content, or
//     a key payd has since forgotten) says only that it exists: a replay
//     shows it as it was created, not as it is.
//  3. So read it (GET, public, active products only): as wanted, done.
//     Otherwise PATCH name, unit_price and active under updateKey, and
//     read again. A product hidden now and on an earlier start has no
//     state to tell the two apart, so that PATCH may be a replay: a
//     second one under a key of its own then does the change.
func (p *payd) ensureProduct(ctx context.Context, want product) error {
	created, err := p.c.CreateProductWithResponse(ctx, &client.CreateProductParams{IdempotencyKey: ptr(want.createKey())},
		client.CreateProductRequest{Sku: want.SKU, Name: want.Name, UnitPrice: want.UnitPrice, Currency: want.Currency, Stock: want.Stock},
		p.asMerchant)
	if err != nil {
		return fmt.Errorf("create %s: %w", want.SKU, err)
	}
	switch {
	case created.StatusCode() == http.StatusCreated && created.HTTPResponse.Header.Get("Idempotent-Replayed") != "true":
		return nil
	case created.StatusCode() == http.StatusCreated:
	case created.StatusCode() == http.StatusConflict && problemCode(created.Body) == "sku_taken":
	default:
		return answer("create "+want.SKU, created.StatusCode(), created.Body)
	}
	for try := 0; ; try++ {
		seen, ok, err := p.shown(ctx, want.SKU)
		if err != nil {
			return err
		}
		if ok && seen.Currency != want.Currency {
			return &refusal{what: "product " + want.SKU, status: http.StatusConflict,
				body: []byte("payd holds it in " + seen.Currency + ", the shop sells it in " + want.Currency + ": a currency never changes, choose another SKU")}
		}
		if ok && seen.Name == want.Name && seen.UnitPrice == want.UnitPrice {
			return nil
		}
		if try == 2 {
			return fmt.Errorf("product %s: payd does not show it as the shop wants it after two changes (is another program changing it?)", want.SKU)
		}
		state := "hidden" // payd shows no updated_at of a hidden product
		if ok {
			state = seen.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
		if try > 0 {
			// The change was replayed, not done: the product was
			// hidden again since the shop last showed it. This change
			// is a new intent.
			state += "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		}
		if err := p.updateProduct(ctx, want, want.updateKey(state)); err != nil {
			return err
		}
	}
}

// shown is GET /v1/products/{sku}: the product if buyers see it.
func (p *payd) shown(ctx context.Context, sku string) (client.Product, bool, error) {
	r, err := p.c.GetProductWithResponse(ctx, sku)
	if err != nil {
		return client.Product{}, false, fmt.Errorf("read %s: %w", sku, err)
	}
	switch {
	case r.JSON200 != nil:
		return *r.JSON200, true, nil
	case r.StatusCode() == http.StatusNotFound:
		return client.Product{}, false, nil
	}
	return client.Product{}, false, answer("read "+sku, r.StatusCode(), r.Body)
}

// updateProduct is PATCH /v1/products/{sku} to want's name and price,
// shown to buyers.
func (p *payd) updateProduct(ctx context.Context, want product, key string) error {
	r, err := p.c.UpdateProductWithResponse(ctx, want.SKU, &client.UpdateProductParams{IdempotencyKey: &key},
		client.UpdateProductRequest{Name: &want.Name, UnitPrice: &want.UnitPrice, Active: ptr(true)}, p.asMerchant)
	if err != nil {
		return fmt.Errorf("update %s: %w", want.SKU, err)
	}
	if r.JSON200 == nil {
		return answer("update "+want.SKU, r.StatusCode(), r.Body)
	}
	return nil
}

// products is what payd shows buyers: the page's list, with payd's
// prices and stock.
func (p *payd) products(ctx context.Context) ([]client.Product, error) {
	var out []client.Product
	var cursor *string
	for {
		r, err := p.c.ListProductsWithResponse(ctx, &client.ListProductsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		if r.JSON200 == nil {
			return nil, answer("list products", r.StatusCode(), r.Body)
		}
		out = append(out, r.JSON200.Data...)
		if r.JSON200.NextCursor == nil {
			return out, nil
		}
		cursor = r.JSON200.NextCursor
	}
}

func ptr[T any](v T) *T { return &v }

var errNotReady = errors.New("the shop is still bringing its catalogue into payd")
