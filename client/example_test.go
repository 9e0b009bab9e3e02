package client_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/oapi-codegen/runtime/types"

	"github.com/payd/payd/app"
	"github.com/payd/payd/client"
)

// TestMain starts a payd of its own (development, SQLite in a temporary
// folder, the sandbox in-process) on a free port and hands its address to
// the example as PAYD_URL, the variable payd's own commands read.
func TestMain(m *testing.M) {
	os.Exit(withPayd(m.Run))
}

func withPayd(run func() int) int {
	dir, err := os.MkdirTemp("", "payd-client-example-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env := map[string]string{
		"PAYD_DATABASE_URL":         "sqlite://" + filepath.Join(dir, "payd.db"),
		"PAYD_SANDBOX_DATABASE_URL": "sqlite://" + filepath.Join(dir, "sandbox.db"),
		"PAYD_SHUTDOWN_DELAY":       "0",
		"PAYD_MERCHANT_KEY":         exampleMerchantKey,
	}
	cfg, err := app.LoadConfig("serve", func(k string) string { return env[k] }, func(fs *flag.FlagSet) error {
		fs.SetOutput(io.Discard)
		return fs.Parse(nil)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "payd config:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := context.WithCancel(context.Background())
	a, err := app.Build(ctx, cfg, app.Listener(ln), app.Logs(io.Discard), app.Banner(io.Discard))
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "payd:", err)
		return 1
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx) }()
	defer func() {
		stop()
		<-served
		a.Close()
	}()
	os.Setenv("PAYD_URL", "http://"+ln.Addr().String())
	if err := stockTea(ctx, "http://"+ln.Addr().String()); err != nil {
		fmt.Fprintln(os.Stderr, "catalogue:", err)
		return 1
	}
	return run()
}

// exampleMerchantKey is the merchant key of the example's payd.
const exampleMerchantKey = "sk_example0example0example0example0example0example0example0ex"

// stockTea puts what the example buys in the catalogue, as the merchant's
// server does: only the merchant sets a price.
func stockTea(ctx context.Context, base string) error {
	m, err := client.NewClientWithResponses(base, client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+exampleMerchantKey)
		return nil
	}))
	if err != nil {
		return err
	}
	key := uuid.NewString()
	r, err := m.CreateProductWithResponse(ctx, &client.CreateProductParams{IdempotencyKey: &key},
		client.CreateProductRequest{Sku: "tea", Name: "Green tea", UnitPrice: "4.95", Currency: "USD"})
	if err != nil {
		return err
	}
	if r.JSON201 == nil {
		return fmt.Errorf("create product: %s %s", r.Status(), r.Body)
	}
	return nil
}

// Example is a whole customer session through the client: register (the
// token comes back), create an order with that token, pay it under an
// idempotency key, and pay it again with the same key, which payd answers
// with the first answer without charging again. The README shows it as a
// program: this body is its main.
func Example() {
	ctx := context.Background()
	base := os.Getenv("PAYD_URL") // as payd admin reads it
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	c, err := client.NewClientWithResponses(base)
	if err != nil {
		log.Fatal(err)
	}

	// Register. A retry with the same key gets the same customer and token.
	email := fmt.Sprintf("ada+%d@example.com", time.Now().UnixNano())
	registerKey := uuid.NewString()
	reg, err := c.RegisterCustomerWithResponse(ctx, &client.RegisterCustomerParams{IdempotencyKey: &registerKey},
		client.RegisterRequest{Email: types.Email(email), Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	if reg.JSON201 == nil {
		log.Fatalf("register: %s %s", reg.Status(), reg.Body)
	}
	token := reg.JSON201.Token
	fmt.Println("registered:", reg.JSON201.Customer.Email == email)

	// Every call of the customer sends its token as a bearer token.
	customer, err := client.NewClientWithResponses(base, client.WithRequestEditorFn(
		func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	// A buyer names what to buy; payd prices it from the catalogue.
	tea := "tea"
	order, err := customer.CreateOrderWithResponse(ctx, &client.CreateOrderParams{}, client.CreateOrderRequest{
		Items: []client.ItemRequest{{Sku: &tea, Quantity: 2}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if order.JSON201 == nil {
		log.Fatalf("order: %s %s", order.Status(), order.Body)
	}
	fmt.Println("order:", order.JSON201.Status, order.JSON201.Amount, order.JSON201.Currency)

	// Pay under a key of its own, then again with the same key, as a
	// client does when a reply is lost: the same answer, one charge.
	payKey := uuid.NewString()
	for range 2 {
		pay, err := customer.PayOrderWithResponse(ctx, order.JSON201.Id, &client.PayOrderParams{IdempotencyKey: &payKey},
			client.PayRequest{PaymentMethod: "pm_ok"})
		if err != nil {
			log.Fatal(err)
		}
		if pay.JSON200 == nil {
			log.Fatalf("pay: %s %s", pay.Status(), pay.Body)
		}
		fmt.Println("pay:", pay.StatusCode(), pay.JSON200.Status, "replayed:", pay.HTTPResponse.Header.Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// registered: true
	// order: pending 9.90 USD
	// pay: 200 paid replayed: false
	// pay: 200 paid replayed: true
}
