package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/oapi-codegen/runtime/types"

	"github.com/payd/payd/client"
)

// contractTransport holds every answer the generated client receives to
// openapi.yaml, as stack.do does for the raw calls.
type contractTransport struct{ t *testing.T }

func (c contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	checkContract(c.t, req, resp.StatusCode, resp.Header, b)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

func bearer(token string) client.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// TestGeneratedClientDrivesPayd walks the customer's path through the
// typed client generated from openapi.yaml: register (and replay it),
// create an order, pay it, read it back, replay the payment and look the
// request up by its key. It shows the document is enough to use payd.
func TestGeneratedClientDrivesPayd(t *testing.T) {
	eachDialect(t, func(t *testing.T, dialect string) {
		s := start(t, on(dialect))
		ctx := context.Background()
		c, err := client.NewClientWithResponses(s.base, client.WithHTTPClient(&http.Client{Transport: contractTransport{t}}))
		if err != nil {
			t.Fatal(err)
		}

		regKey := uuid.NewString()
		reg := client.RegisterRequest{Email: types.Email("client-" + uuid.NewString() + "@example.com"), Name: "Ada Lovelace"}
		r1, err := c.RegisterCustomerWithResponse(ctx, &client.RegisterCustomerParams{IdempotencyKey: &regKey}, reg)
		if err != nil || r1.JSON201 == nil {
			t.Fatalf("RegisterCustomer = %v, %s; want 201", err, answer(r1))
		}
		r2, err := c.RegisterCustomerWithResponse(ctx, &client.RegisterCustomerParams{IdempotencyKey: &regKey}, reg)
		if err != nil || r2.JSON201 == nil {
			t.Fatalf("RegisterCustomer replay = %v, %s; want 201", err, answer(r2))
		}
		if r2.JSON201.Customer.Id != r1.JSON201.Customer.Id || r2.JSON201.Token != r1.JSON201.Token ||
			r2.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("register replay gave customer %s token equal=%v replayed=%q; want the same customer and token, replayed",
				r2.JSON201.Customer.Id, r2.JSON201.Token == r1.JSON201.Token, r2.HTTPResponse.Header.Get("Idempotent-Replayed"))
		}
		auth := bearer(r1.JSON201.Token)

		notebook := s.priced("9.95")
		o, err := c.CreateOrderWithResponse(ctx, &client.CreateOrderParams{}, client.CreateOrderRequest{
			Items: []client.ItemRequest{{Sku: &notebook, Quantity: 2}},
		}, auth)
		if err != nil || o.JSON201 == nil {
			t.Fatalf("CreateOrder = %v, %s; want 201", err, answer(o))
		}
		if o.JSON201.Amount != "19.90" || o.JSON201.Status != client.OrderStatusPending {
			t.Fatalf("order = %s %s, want 19.90 pending", o.JSON201.Amount, o.JSON201.Status)
		}
		id := o.JSON201.Id

		payKey := uuid.NewString()
		p1, err := c.PayOrderWithResponse(ctx, id, &client.PayOrderParams{IdempotencyKey: &payKey}, client.PayRequest{PaymentMethod: "pm_ok"}, auth)
		if err != nil || p1.JSON200 == nil || p1.JSON200.Status != client.OrderStatusPaid {
			t.Fatalf("PayOrder = %v, %s; want 200 paid", err, answer(p1))
		}

		g, err := c.GetOrderWithResponse(ctx, id, auth)
		if err != nil || g.JSON200 == nil {
			t.Fatalf("GetOrder = %v, %s; want 200", err, answer(g))
		}
		if g.JSON200.Status != client.OrderStatusPaid || len(g.JSON200.Attempts) != 1 || g.JSON200.Attempts[0].RequestId != payKey ||
			g.JSON200.PayRequestId == nil || *g.JSON200.PayRequestId != payKey {
			t.Fatalf("order after paying = %s", g.Body)
		}

		p2, err := c.PayOrderWithResponse(ctx, id, &client.PayOrderParams{IdempotencyKey: &payKey}, client.PayRequest{PaymentMethod: "pm_ok"}, auth)
		if err != nil || p2.JSON200 == nil {
			t.Fatalf("PayOrder replay = %v, %s; want 200", err, answer(p2))
		}
		if p2.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(p2.Body, p1.Body) {
			t.Fatalf("pay replay: replayed=%q, body equal=%v; want the stored answer byte for byte",
				p2.HTTPResponse.Header.Get("Idempotent-Replayed"), bytes.Equal(p2.Body, p1.Body))
		}
		if n := s.charges(id); n != 1 {
			t.Fatalf("provider charged the order %d times, want 1", n)
		}

		rec, err := c.GetRequestWithResponse(ctx, payKey, auth)
		if err != nil || rec.JSON200 == nil {
			t.Fatalf("GetRequest = %v, %s; want 200", err, answer(rec))
		}
		if rec.JSON200.Status != client.RecordStatusSucceeded || rec.JSON200.Response == nil || rec.JSON200.Response.Status != http.StatusOK {
			t.Fatalf("request record = %s, want succeeded with the stored 200", rec.Body)
		}
	})
}

// answer describes a generated response, or its absence, in a failure
// message.
func answer[R any, P interface {
	*R
	StatusCode() int
	GetBody() []byte
}](r P) string {
	if r == nil {
		return "no response"
	}
	return fmt.Sprintf("%d %s", r.StatusCode(), r.GetBody())
}
