package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/payd/payd/client"
)

// createOrder is POST /api/orders: the page's cart becomes an order in
// payd, created with the merchant key. The page names SKUs and
// quantities; payd prices them from the catalogue and takes the stock.
// The idempotency key is the cart's: a checkout the browser sends again
// (a double click, a lost reply) is the same order.
func (s *shop) createOrder(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, errNotReady.Error())
		return
	}
	var cart cartRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	if err := dec.Decode(&cart); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not a cart: "+err.Error())
		return
	}
	if msg := s.checkCart(cart); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	lines := make([]client.ItemRequest, len(cart.Items))
	for i, it := range cart.Items {
		lines[i] = client.ItemRequest{Sku: ptr(it.SKU), Quantity: it.Quantity} // no price: payd's catalogue has it
	}
	ctx, cancel := timeout(r.Context())
	defer cancel()
	key := "shop-cart-" + cart.CartID
	resp, err := s.payd.c.CreateOrderWithResponse(ctx, &client.CreateOrderParams{IdempotencyKey: &key},
		client.CreateOrderRequest{Currency: ptr(s.catalogue[0].Currency), Items: lines}, s.payd.asMerchant)
	if err != nil {
		s.log.Error("create order", "err", err)
		writeError(w, http.StatusBadGateway, "payd could not be reached")
		return
	}
	if resp.StatusCode() != http.StatusCreated {
		if resp.StatusCode() >= 500 {
			s.log.Error("create order", "status", resp.StatusCode(), "body", string(resp.Body))
		}
		passOn(w, resp.HTTPResponse, resp.Body) // out_of_stock, ...: the page says what it means
		return
	}
	created := resp.JSON201
	if created == nil || created.Id == "" || created.ClientSecret == nil || *created.ClientSecret == "" {
		s.log.Error("create order: an answer without an id or a client secret", "status", resp.StatusCode())
		writeError(w, http.StatusBadGateway, "payd's answer carried no client secret")
		return
	}
	s.orders.add(shopOrder{ID: created.Id, Amount: created.Amount, Currency: created.Currency})
	fmt.Fprintf(s.out, "order %s created: %s %s\n", created.Id, created.Amount, created.Currency)
	writeJSON(w, http.StatusCreated, orderCreated{OrderID: created.Id, ClientSecret: *created.ClientSecret,
		Amount: created.Amount, Currency: created.Currency})
}

// checkCart refuses, before payd is asked, a cart the page could not have
// sent: payd checks it again, and is the one that prices it.
func (s *shop) checkCart(c cartRequest) string {
	if !cartIDPattern.MatchString(c.CartID) {
		return "cart_id: 8 to 64 of A-Z a-z 0-9 -"
	}
	if len(c.Items) == 0 || len(c.Items) > len(s.catalogue) {
		return fmt.Sprintf("items: 1 to %d lines", len(s.catalogue))
	}
	seen := map[string]bool{}
	for i, it := range c.Items {
		if !s.sells(it.SKU) || seen[it.SKU] {
			return fmt.Sprintf("items[%d].sku: not a product of this shop, or named twice", i)
		}
		seen[it.SKU] = true
		if it.Quantity < 1 || it.Quantity > 99 {
			return fmt.Sprintf("items[%d].quantity: 1 to 99", i)
		}
	}
	return ""
}

// payOrder is POST /api/orders/{id}/pay. The browser pays with the
// order's client secret, not the shop's key; payd answers no CORS
// preflight, so a page served by the shop cannot call payd itself, and
// the shop passes the call on: the browser's Authorization (the client
// secret), its Idempotency-Key and its payment method, and nothing of the
// shop's. payd's answer comes back as payd wrote it. What the shop
// believes is the event payd signs (webhooks.go), never this answer.
func (s *shop) payOrder(w http.ResponseWriter, r *http.Request) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || secret == "" {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeError(w, http.StatusUnauthorized, "pay with the order's client secret: Authorization: Bearer <client_secret>")
		return
	}
	var pay struct {
		PaymentMethod string `json:"payment_method"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&pay); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not {payment_method}: "+err.Error())
		return
	}
	params := &client.PayOrderParams{}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		params.IdempotencyKey = &key // else payd answers 400 idempotency_key_missing
	}
	ctx, cancel := timeout(r.Context())
	defer cancel()
	resp, err := s.payd.c.PayOrderWithResponse(ctx, r.PathValue("id"), params,
		client.PayRequest{PaymentMethod: pay.PaymentMethod}, bearer(secret))
	if err != nil {
		s.log.Error("pay", "err", err)
		writeError(w, http.StatusBadGateway, "payd could not be reached: pay again with the same Idempotency-Key")
		return
	}
	passOn(w, resp.HTTPResponse, resp.Body)
}

// bearer sends token instead of anything else.
func bearer(token string) client.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}
