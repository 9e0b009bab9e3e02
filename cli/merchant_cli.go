package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// merchantAbout is `payd help merchant`: the merchant's verbs.
const merchantAbout = `Talks to a running payd as the merchant's server, with a merchant key (sk_...):
the catalogue, which only the merchant writes (docs/adr/0058-the-merchant-key-and-the-catalogue.md),
and the captures, cancels and shipments of orders (docs/adr/0060-holds-captures-and-shipments.md).
Prints tables for people; -json prints payd's JSON answer for scripts.

  payd merchant products list [-limit N] [-cursor C]
                                              the active products, as buyers see them (no key needed)
  payd merchant products show SKU             one active product (no key needed)
  payd merchant products create SKU -name N -price P -currency C [-stock N] [-key K]
                                              a new product; without -stock its stock is unlimited
  payd merchant products update SKU [-name N] [-price P] [-activate|-deactivate] [-key K]
                                              rename, reprice, hide or show a product
  payd merchant products stock SKU ADJUST [-key K]
                                              add to (5) or take from (-5) a product's stock; never below 0
  payd merchant orders ship ORDER_ID -items SKU:QTY[,SKU:QTY...] [-carrier C] [-tracking T] [-key K]
                                              ship units of a paid order; never more than ordered
  payd merchant orders capture ORDER_ID [-amount A] [-key K]
                                              capture an authorized (held) order: all of it, or A; once
  payd merchant orders cancel ORDER_ID [-key K]
                                              cancel an order; an authorized one's hold is voided

Every verb takes -url (PAYD_URL, default http://127.0.0.1:8080), -merchant-key
(PAYD_MERCHANT_KEY; prefer the variable: a flag shows in the process list) and -json.
A change is sent with one idempotency key, repeated on a lost answer; -key K sets
it, so a script that reruns a command after a timeout acts once. An answer other
than success prints payd's problem and exits 1; a command line payd merchant cannot
take (an unknown verb or flag, a missing argument, a SKU or -key of a shape payd
never takes, an ADJUST that is not a whole number) exits 2 before anything is sent.`

// merchantCaller is payd merchant's: the merchant key.
var merchantCaller = &caller{command: "merchant", verbs: merchantVerbs, tokenFlag: "merchant-key", tokenEnv: "PAYD_MERCHANT_KEY",
	tokenWhat: "merchant key", example: "products list"}

// merchantVerbs makes each merchant verb afresh.
var merchantVerbs = map[string]func() adminVerb{
	"products list":   productsList,
	"products show":   productsShow,
	"products create": productsCreate,
	"products update": productsUpdate,
	"products stock":  productsStock,
	"orders ship":     ordersShip,
	"orders capture":  ordersCapture,
	"orders cancel":   ordersCancel,
}

// merchantCommand is `payd merchant GROUP VERB ...`.
func merchantCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return verbCommand(ctx, merchantCaller, args, getenv, stdout, stderr)
}

func checkSKU(v string) error {
	if domain.ValidSKU(v) {
		return nil
	}
	return usagef("SKU %q: want 1 to 64 letters, digits or . _ -", v)
}

func productsList() adminVerb {
	var limit int
	var cursor string
	return adminVerb{
		usage:  "[-limit N] [-cursor C]",
		public: true,
		flags: func(fs *flag.FlagSet) {
			fs.IntVar(&limit, "limit", 20, "products per page")
			fs.StringVar(&cursor, "cursor", "", "the next page's cursor, printed under the table")
		},
		check: func([]string) error {
			if limit < 1 || limit > domain.MaxPageSize {
				return usagef("-limit %d: want a whole number from 1 to %d", limit, domain.MaxPageSize)
			}
			if cursor != "" && !domain.ValidSKU(cursor) {
				return usagef("-cursor %q: want the cursor printed under an earlier page", cursor)
			}
			return nil
		},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			p := client.ListProductsParams{Limit: &limit}
			if cursor != "" {
				p.Cursor = &cursor
			}
			var list client.ProductList
			res, err := a.api.ListProducts(ctx, &p)
			if err := a.get(res, err, &list); err != nil || a.json {
				return err
			}
			printProducts(a.out, list.Data)
			if list.NextCursor != nil {
				fmt.Fprintf(a.out, "more: -cursor %s\n", *list.NextCursor)
			}
			return nil
		},
	}
}

func productsShow() adminVerb {
	return adminVerb{
		usage:  "SKU",
		nargs:  1,
		public: true,
		flags:  func(*flag.FlagSet) {},
		check:  func(pos []string) error { return checkSKU(pos[0]) },
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			var p client.Product
			res, err := a.api.GetProduct(ctx, pos[0])
			if err := a.get(res, err, &p); err != nil || a.json {
				return err
			}
			printProducts(a.out, []client.Product{p})
			return nil
		},
	}
}

func productsCreate() adminVerb {
	var name, price, currency, stock, key string
	return adminVerb{
		usage: "SKU -name N -price P -currency C [-stock N] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&name, "name", "", "the product's name; required")
			fs.StringVar(&price, "price", "", "the unit price, a decimal such as 4.95; required")
			fs.StringVar(&currency, "currency", "", "the price's currency, such as USD; required")
			fs.StringVar(&stock, "stock", "", "how many there are (default: unlimited)")
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a creation whose answer was lost")
		},
		check: func(pos []string) error {
			if name == "" || price == "" || currency == "" {
				return usagef("-name, -price and -currency are required (run 'payd merchant products create -h')")
			}
			if _, err := optInt("stock", stock); err != nil {
				return err
			}
			if err := checkSKU(pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			n, _ := optInt("stock", stock)
			body := client.CreateProductRequest{Sku: pos[0], Name: name, UnitPrice: price, Currency: currency, Stock: n}
			return a.product(ctx, func() (*http.Response, error) {
				return a.api.CreateProduct(ctx, &client.CreateProductParams{IdempotencyKey: &idemKey}, body)
			})
		},
	}
}

func productsUpdate() adminVerb {
	var name, price, key string
	var activate, deactivate bool
	return adminVerb{
		usage: "SKU [-name N] [-price P] [-activate|-deactivate] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&name, "name", "", "a new name")
			fs.StringVar(&price, "price", "", "a new unit price, in the product's currency")
			fs.BoolVar(&activate, "activate", false, "show the product to buyers")
			fs.BoolVar(&deactivate, "deactivate", false, "hide the product from buyers")
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a change whose answer was lost")
		},
		check: func(pos []string) error {
			if activate && deactivate {
				return usagef("-activate and -deactivate: choose one")
			}
			if name == "" && price == "" && !activate && !deactivate {
				return usagef("nothing to change: give -name, -price, -activate or -deactivate")
			}
			if err := checkSKU(pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			var body client.UpdateProductRequest
			if name != "" {
				body.Name = &name
			}
			if price != "" {
				body.UnitPrice = &price
			}
			if activate || deactivate {
				body.Active = &activate
			}
			return a.product(ctx, func() (*http.Response, error) {
				return a.api.UpdateProduct(ctx, pos[0], &client.UpdateProductParams{IdempotencyKey: &idemKey}, body)
			})
		},
	}
}

func productsStock() adminVerb {
	var key string
	return adminVerb{
		usage: "SKU ADJUST [-key K]",
		nargs: 2,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat an adjustment whose answer was lost")
		},
		check: func(pos []string) error {
			if _, err := strconv.ParseInt(pos[1], 10, 64); err != nil {
				return usagef("ADJUST %q: want a signed whole number such as 5 or -5", pos[1])
			}
			if err := checkSKU(pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			adjust, _ := strconv.ParseInt(pos[1], 10, 64)
			return a.product(ctx, func() (*http.Response, error) {
				return a.api.AdjustProductStock(ctx, pos[0], &client.AdjustProductStockParams{IdempotencyKey: &idemKey},
					client.AdjustStockRequest{Adjust: adjust})
			})
		},
	}
}

func ordersShip() adminVerb {
	var items, carrier, tracking, key string
	var lines []client.ShipmentLineRequest
	return adminVerb{
		usage: "ORDER_ID -items SKU:QTY[,SKU:QTY...] [-carrier C] [-tracking T] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&items, "items", "", "what the parcel carries, as SKU:QTY pairs separated by commas (mug:2,tea:1); required")
			fs.StringVar(&carrier, "carrier", "", "who carries it (optional)")
			fs.StringVar(&tracking, "tracking", "", "its tracking number (optional)")
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a shipment whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ORDER_ID", pos[0]); err != nil {
				return err
			}
			if items == "" {
				return usagef("-items is required: SKU:QTY pairs such as mug:2,tea:1 (run 'payd merchant orders ship -h')")
			}
			lines = lines[:0]
			for _, pair := range strings.Split(items, ",") {
				sku, qty, ok := strings.Cut(strings.TrimSpace(pair), ":")
				n, err := strconv.Atoi(qty)
				if !ok || sku == "" || err != nil || n < 1 {
					return usagef("-items %q: want SKU:QTY pairs such as mug:2,tea:1, each QTY a whole number of at least 1", pair)
				}
				lines = append(lines, client.ShipmentLineRequest{Sku: sku, Quantity: n})
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			body := client.ShipmentRequest{Items: lines}
			if carrier != "" {
				body.Carrier = &carrier
			}
			if tracking != "" {
				body.TrackingNumber = &tracking
			}
			out, res, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.CreateShipment(ctx, pos[0], &client.CreateShipmentParams{IdempotencyKey: &idemKey}, body)
			})
			if err != nil {
				return err
			}
			var sh client.Shipment
			if err := a.decode(out, &sh); err != nil || a.json {
				return err
			}
			carried := make([]string, len(sh.Items))
			for i, l := range sh.Items {
				carried[i] = fmt.Sprintf("%d × %s", l.Quantity, l.Sku)
			}
			fmt.Fprintf(a.out, "shipment %s of order %s: %s%s\n", sh.Id, sh.OrderId, strings.Join(carried, ", "), replayedNote(res))
			if sh.Carrier != nil || sh.TrackingNumber != nil {
				fmt.Fprintf(a.out, "carrier %s, tracking %s\n", orNone(sh.Carrier), orNone(sh.TrackingNumber))
			}
			return nil
		},
	}
}

func ordersCapture() adminVerb {
	var amount, key string
	return adminVerb{
		usage: "ORDER_ID [-amount A] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&amount, "amount", "", "how much, in the order's currency (e.g. 10.00), at most what it holds; default: all of it")
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a capture whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ORDER_ID", pos[0]); err != nil {
				return err
			}
			if amount != "" {
				if _, err := domain.ParseDecimal(amount, "-amount"); err != nil {
					return usagef("-amount %q: want a decimal amount such as 10.00", amount)
				}
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			var body client.CaptureRequest
			if amount != "" {
				body.Amount = &amount
			}
			out, res, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.CaptureOrder(ctx, pos[0], &client.CaptureOrderParams{IdempotencyKey: &idemKey}, body)
			})
			if err != nil {
				return err
			}
			return a.printOrder(out, res)
		},
	}
}

func ordersCancel() adminVerb {
	var key string
	return adminVerb{
		usage: "ORDER_ID [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a cancel whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ORDER_ID", pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			out, res, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.CancelOrder(ctx, pos[0], &client.CancelOrderParams{IdempotencyKey: &idemKey}, client.KeyOnlyRequest{})
			})
			if err != nil {
				return err
			}
			return a.printOrder(out, res)
		},
	}
}

// printOrder prints an order answer in one line: its status, and what its
// charge holds or took.
func (a *adminConn) printOrder(out []byte, res *http.Response) error {
	var o client.Order
	if err := a.decode(out, &o); err != nil || a.json {
		return err
	}
	line := fmt.Sprintf("order %s: %s, %s %s", o.Id, o.Status, o.Amount, o.Currency)
	switch {
	case o.CaptureBefore != nil:
		line += ", held until " + o.CaptureBefore.UTC().Format(time.RFC3339)
	case o.CapturedAmount != "0.00" && o.CapturedAmount != "":
		line += ", captured " + o.CapturedAmount
	}
	fmt.Fprintln(a.out, line+replayedNote(res))
	return nil
}

// orNone is *s, or "none" for nil.
func orNone(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

// product sends a change of a product and prints the product it answers.
func (a *adminConn) product(ctx context.Context, send func() (*http.Response, error)) error {
	out, _, err := a.change(ctx, send)
	if err != nil {
		return err
	}
	var p client.Product
	if err := a.decode(out, &p); err != nil || a.json {
		return err
	}
	printProducts(a.out, []client.Product{p})
	return nil
}

// optInt reads an optional whole-number flag ("" is none).
func optInt(name, v string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, usagef("-%s %q: want a whole number", name, v)
	}
	return &n, nil
}

// printProducts prints products as a table; an unlimited stock is shown
// as "unlimited".
func printProducts(w io.Writer, ps []client.Product) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tNAME\tPRICE\tSTOCK\tACTIVE")
	for _, p := range ps {
		stock := "unlimited"
		if p.Stock != nil {
			stock = strconv.FormatInt(*p.Stock, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%v\n", p.Sku, p.Name, p.UnitPrice, p.Currency, stock, p.Active)
	}
	_ = tw.Flush()
}
