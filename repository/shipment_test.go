package repository_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/dbtest"
	"github.com/payd/payd/migrations"
	"github.com/payd/payd/repository"
)

// ship ships lines of order id as the service does: domain plans it from
// the order under its lock.
func ship(t *testing.T, s *repository.OrderStore, id string, lines ...domain.ShipLine) (domain.Order, error) {
	t.Helper()
	n := domain.NewShipment{Items: lines, Carrier: "DHL", TrackingNumber: "JD" + newID()[:8]}
	sh := domain.Shipment{ID: newID(), OrderID: id, Items: lines, Carrier: n.Carrier, TrackingNumber: n.TrackingNumber}
	o, _, err := s.Ship(t.Context(), sh, func(o domain.Order) ([]domain.LineShipment, domain.FulfillmentEvent, error) {
		return o.PlanShipment(n)
	}, domain.Cause{Kind: domain.CauseMerchant, Ref: "key-" + sh.ID}, t0.Add(time.Minute))
	return o, err
}

// shippedOf is what order o's lines have shipped, in position order.
func shippedOf(o domain.Order) []int64 {
	out := make([]int64, len(o.Items))
	for i, it := range o.Items {
		out[i] = it.Shipped
	}
	return out
}

// TestShip: a paid order ships in parts, each part one shipment with its
// lines, the lines' counts, the order's fulfilment and version moved, and
// one order.shipped event that names the shipment; what it may not ship
// (too much, a SKU it lacks, an order not paid or unknown) writes nothing.
func TestShip(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidOrder(t, db) // tea ×2, cup ×1

		got, err := ship(t, s, o.ID, domain.ShipLine{SKU: "tea", Quantity: 1})
		if err != nil {
			t.Fatalf("first shipment: %v", err)
		}
		if got.Fulfillment != domain.FulfillmentPartiallyShipped || fmt.Sprint(shippedOf(got)) != "[1 0]" ||
			got.Version != o.Version+1 || len(got.Shipments) != 1 {
			t.Fatalf("after the first shipment: %s, shipped %v, version %d (was %d), %d shipments",
				got.Fulfillment, shippedOf(got), got.Version, o.Version, len(got.Shipments))
		}
		first := got.Shipments[0]
		if first.OrderID != o.ID || first.Carrier != "DHL" || fmt.Sprint(first.Items) != "[{tea 1}]" {
			t.Errorf("first shipment = %+v", first)
		}

		refused := []struct {
			name  string
			id    string
			lines []domain.ShipLine
			want  error
		}{
			{"more tea than left", o.ID, []domain.ShipLine{{SKU: "tea", Quantity: 2}}, &domain.ValidationError{}},
			{"a SKU the order lacks", o.ID, []domain.ShipLine{{SKU: "pen", Quantity: 1}}, &domain.ValidationError{}},
			{"a pending order", newOrder(t, db).ID, []domain.ShipLine{{SKU: "tea", Quantity: 1}}, domain.ErrOrderNotPaid},
			{"no such order", newID(), []domain.ShipLine{{SKU: "tea", Quantity: 1}}, domain.ErrOrderNotFound},
		}
		for _, r := range refused {
			before, _ := s.FindByID(t.Context(), r.id)
			_, err := ship(t, s, r.id, r.lines...)
			var invalid *domain.ValidationError
			if ok := errors.Is(err, r.want) || (errors.As(r.want, &invalid) && errors.As(err, &invalid)); !ok {
				t.Errorf("%s: Ship() = %v, want %T %v", r.name, err, r.want, r.want)
			}
			after, _ := s.FindByID(t.Context(), r.id)
			list, lerr := s.ShipmentsOf(t.Context(), r.id)
			if after.Version != before.Version || fmt.Sprint(shippedOf(after)) != fmt.Sprint(shippedOf(before)) ||
				after.Fulfillment != before.Fulfillment || lerr != nil || (r.id == o.ID) != (len(list) == 1) {
				t.Errorf("%s: the refused shipment changed the order: version %d → %d, shipped %v → %v, %d shipments (%v)",
					r.name, before.Version, after.Version, shippedOf(before), shippedOf(after), len(list), lerr)
			}
		}

		got, err = ship(t, s, o.ID, domain.ShipLine{SKU: "cup", Quantity: 1}, domain.ShipLine{SKU: "tea", Quantity: 1})
		if err != nil {
			t.Fatalf("last shipment: %v", err)
		}
		if got.Fulfillment != domain.FulfillmentShipped || fmt.Sprint(shippedOf(got)) != "[2 1]" || len(got.Shipments) != 2 {
			t.Fatalf("after the last shipment: %s, shipped %v, %d shipments", got.Fulfillment, shippedOf(got), len(got.Shipments))
		}
		if _, err := ship(t, s, o.ID, domain.ShipLine{SKU: "cup", Quantity: 1}); !errors.As(err, new(*domain.ValidationError)) {
			t.Errorf("a shipment of a shipped order = %v, want a validation error", err)
		}

		// The events: one per shipment, each naming its own, with the
		// fulfilment it left.
		events, err := s.EventsOf(t.Context(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		notify := repository.NewNotifyStore(db)
		var told []string
		for _, e := range events {
			if e.Type != domain.NotifyOrderShipped {
				continue
			}
			ev, err := notify.FindEvent(t.Context(), e.ID)
			if err != nil || ev.Shipment == nil {
				t.Fatalf("FindEvent(%s) = %+v, %v; want its shipment", e.ID, ev.Shipment, err)
			}
			if e.Cause.Kind != domain.CauseMerchant || ev.Seq != e.Seq {
				t.Errorf("event %s: cause %v, seq %d/%d", e.ID, e.Cause, ev.Seq, e.Seq)
			}
			told = append(told, fmt.Sprintf("%s:%t:%v", ev.Order.Fulfillment, ev.Shipment.ID == got.Shipments[len(told)].ID, ev.Shipment.Items))
		}
		if want := "[partially_shipped:true:[{tea 1}] shipped:true:[{cup 1} {tea 1}]]"; fmt.Sprint(told) != want {
			t.Errorf("order.shipped events = %v, want %s", told, want)
		}
	})
}

// TestShipRace: 20 shipments of one unit each race for a line of 5 on
// one order: exactly 5 ship, the rest are refused as too many, and the
// line, the shipments and the events agree.
func TestShipRace(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidMugs(t, db, 5)
		stores := make([]*repository.OrderStore, 20)
		for i := range stores {
			stores[i] = s
		}
		shipped := shipRace(t, o.ID, stores)
		got := findOrder(t, db, o.ID)
		list, err := s.ShipmentsOf(t.Context(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		events, err := s.EventsOf(t.Context(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		told := 0
		for _, e := range events {
			if e.Type == domain.NotifyOrderShipped {
				told++
			}
		}
		if shipped != 5 || got.Items[0].Shipped != 5 || len(list) != 5 || told != 5 || got.Fulfillment != domain.FulfillmentShipped {
			t.Errorf("%d shipments succeeded, line shipped %d, %d stored, %d events, fulfilment %s; want 5 of each and shipped",
				shipped, got.Items[0].Shipped, len(list), told, got.Fulfillment)
		}
	})
}

// paidMugs stores an order of qty mugs, one line, and pays it.
func paidMugs(t *testing.T, db *repository.DB, qty int64) domain.Order {
	t.Helper()
	s := repository.NewOrderStore(db)
	o := pendingOrder(newCustomer(t, db).ID)
	o.Items = []domain.Item{{SKU: "mug", Name: "Mug", Quantity: qty, UnitPrice: dec("12.00")}}
	o.Amount = domain.Total(o.Items)
	createOrder(t, db, o)
	if ok, err := s.Claim(t.Context(), o.ID, "req-1", domain.AnyVersion, t0); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if ok, err := s.MarkPaid(t.Context(), o.ID, "req-1", domain.Cause{Kind: domain.CausePayRequest, Ref: "req-1"}, t0); !ok || err != nil {
		t.Fatalf("MarkPaid = %v, %v", ok, err)
	}
	return o
}

// shipRace ships one mug of order id through each of stores at once and
// returns how many shipped; a shipment refused for anything but too many
// units fails the test.
func shipRace(t *testing.T, id string, stores []*repository.OrderStore) int {
	t.Helper()
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { _, errs[i] = ship(t, s, id, domain.ShipLine{SKU: "mug", Quantity: 1}) })
	}
	wg.Wait()
	shipped := 0
	for i, err := range errs {
		switch {
		case err == nil:
			shipped++
		case !errors.As(err, new(*domain.ValidationError)):
			t.Errorf("order %s: shipment %d = %v, want nil or a validation error", id, i, err)
		}
	}
	return shipped
}

// TestShippedCheck: the schema holds a line's shipped count to its
// quantity, whatever the code does.
func TestShippedCheck(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		o := newOrder(t, db)
		for _, set := range []string{"shipped = quantity + 1", "shipped = -1"} {
			if err := db.Gorm().Exec(`UPDATE order_items SET `+set+` WHERE order_id = ?`, o.ID).Error; err == nil {
				t.Errorf("UPDATE order_items SET %s succeeded, want the CHECK to refuse it", set)
			}
		}
		if err := db.Gorm().Exec(`UPDATE orders SET fulfillment_status = 'lost' WHERE id = ?`, o.ID).Error; err == nil {
			t.Error("a fulfilment status outside the machine was stored")
		}
	})
}

// TestShipFindsItsRequest: a request that runs again after its answer was
// lost (a takeover, a kill after COMMIT) comes with a new shipment ID and
// the same key: it finds the shipment its first run made, and writes
// nothing; the same key with another request is ErrKeyReused; another key
// ships.
func TestShipFindsItsRequest(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, d migrations.Dialect) {
		db := dbtest.Open(t, d)
		s := repository.NewOrderStore(db)
		o := paidOrder(t, db) // tea ×2, cup ×1
		run := func(key, fingerprint string) (domain.Order, domain.Shipment, error) {
			lines := []domain.ShipLine{{SKU: "tea", Quantity: 1}}
			sh := domain.Shipment{ID: newID(), OrderID: o.ID, Items: lines, RequestKey: key, RequestFingerprint: fingerprint}
			return s.Ship(t.Context(), sh, func(o domain.Order) ([]domain.LineShipment, domain.FulfillmentEvent, error) {
				return o.PlanShipment(domain.NewShipment{Items: lines})
			}, domain.Cause{Kind: domain.CauseMerchant, Ref: key}, t0.Add(time.Minute))
		}
		_, first, err := run("ship-1", "fp-1")
		if err != nil {
			t.Fatal(err)
		}
		before := findOrder(t, db, o.ID)
		got, again, err := run("ship-1", "fp-1")
		if err != nil || again.ID != first.ID || len(got.Shipments) != 1 {
			t.Fatalf("the request run again = %+v, %d shipments, %v; want its first shipment %s", again, len(got.Shipments), err, first.ID)
		}
		after := findOrder(t, db, o.ID)
		if after.Version != before.Version || fmt.Sprint(shippedOf(after)) != "[1 0]" {
			t.Errorf("running the request again changed the order: version %d → %d, shipped %v", before.Version, after.Version, shippedOf(after))
		}
		if _, _, err := run("ship-1", "fp-other"); !errors.Is(err, domain.ErrKeyReused) {
			t.Errorf("the key with another request = %v, want ErrKeyReused", err)
		}
		if _, second, err := run("ship-2", "fp-2"); err != nil || second.ID == first.ID {
			t.Errorf("another key = %+v, %v; want a second shipment", second, err)
		}
		events, err := s.EventsOf(t.Context(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		told := 0
		for _, e := range events {
			if e.Type == domain.NotifyOrderShipped {
				told++
			}
		}
		if list, _ := s.ShipmentsOf(t.Context(), o.ID); len(list) != 2 || told != 2 {
			t.Errorf("%d shipments and %d order.shipped events, want 2 of each", len(list), told)
		}
	})
}
