package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// Shipments (ADR 0060): a shipment of a paid order is one transaction.
// It takes the order's lock first, so two shipments of one order never
// plan from the same counts; then each line's shipped count rises by a
// guarded statement (the CHECK shipped <= quantity stands behind it), the
// order's fulfillment_status moves by its machine's guard, the shipment
// is written, and so is the event that tells the shop, all or nothing.

var (
	shipPart = guardOf(domain.FulfillmentMachine, domain.FulfillmentShipPart)
	shipAll  = guardOf(domain.FulfillmentMachine, domain.FulfillmentShipAll)

	// shipLine raises one line's shipped count, never past its quantity.
	shipLine = `UPDATE order_items SET shipped = shipped + ?
		WHERE order_id = ? AND position = ? AND shipped + ? <= quantity`

	// shipOrder moves a paid order's fulfilment by one event; its
	// arguments are the order's ID. Only a paid order ships.
	shipOrder = map[domain.FulfillmentEvent]string{
		domain.FulfillmentShipPart: fulfil(shipPart),
		domain.FulfillmentShipAll:  fulfil(shipAll),
	}

	// paidStatus is the one order status a shipment is taken in.
	paidStatus = sqlStatus(domain.StatusPaid)
)

// fulfil is the guarded statement of one fulfilment event.
func fulfil(g statusGuard) string {
	return `UPDATE orders SET fulfillment_status = ` + g.to + `
		WHERE id = ? AND status = ` + paidStatus + ` AND fulfillment_status IN ` + g.from
}

// shipmentRow is a row of shipments.
type shipmentRow struct {
	ID             string  `gorm:"column:id"`
	OrderID        string  `gorm:"column:order_id"`
	Carrier        string  `gorm:"column:carrier"`
	TrackingNumber string  `gorm:"column:tracking_number"`
	RequestKey     *string `gorm:"column:request_key"`
	Fingerprint    *string `gorm:"column:request_fingerprint"`
	CreatedAt      utcTime `gorm:"column:created_at"`
}

// TableName tells GORM the table.
func (shipmentRow) TableName() string { return "shipments" }

// shipmentItemRow is a row of shipment_items.
type shipmentItemRow struct {
	ShipmentID string `gorm:"column:shipment_id"`
	Position   int    `gorm:"column:position"`
	SKU        string `gorm:"column:sku"`
	Quantity   int64  `gorm:"column:quantity"`
}

// TableName tells GORM the table.
func (shipmentItemRow) TableName() string { return "shipment_items" }

// Ship ships sh (its ID, lines, carrier, tracking number and request
// key) of order sh.OrderID as plan decides from the order read under its
// lock (domain.Order.PlanShipment), and writes the order.shipped event
// caused by c, in one transaction (the caller's, or one of its own). It
// returns the order as the shipment left it, and the shipment.
//
// A shipment the order already holds under sh.RequestKey is that
// request's, run again after its answer was lost (a takeover, a kill
// after COMMIT): it is returned as it was, and nothing is written; under
// another fingerprint it is domain.ErrKeyReused. An order that does not
// exist is domain.ErrOrderNotFound; whatever plan refuses (an order not
// paid, lines it does not have or has shipped) is plan's error, and
// nothing is written.
func (s *OrderStore) Ship(ctx context.Context, sh domain.Shipment, plan func(domain.Order) ([]domain.LineShipment, domain.FulfillmentEvent, error),
	c domain.Cause, now time.Time) (domain.Order, domain.Shipment, error) {
	what := act{"ship order", sh.OrderID}
	eventID, ref, err := eventKeys(domain.NotifyOrderShipped, c)
	if err != nil {
		return domain.Order{}, domain.Shipment{}, fmt.Errorf("%s: %w", what, err)
	}
	asked := int64(0)
	for _, l := range sh.Items {
		asked += l.Quantity
	}
	var before *shipmentRow // the request's own shipment, made by an earlier run
	err = s.db.inTx(ctx, func(ctx context.Context) error {
		before = nil // run again after a conflict: start clean
		// The lock: every change of the order raises its version, and
		// this one is the shipment's (its event's seq).
		n, err := s.db.exec(ctx, `UPDATE orders SET version = version + 1, updated_at = ? WHERE id = ?`, ts(now), sh.OrderID)
		if err != nil {
			return fmt.Errorf("%s: lock: %w", what, err)
		}
		if n != 1 {
			return domain.ErrOrderNotFound
		}
		if sh.RequestKey != "" {
			var rows []shipmentRow
			if err := s.db.conn(ctx).Where("order_id = ? AND request_key = ?", sh.OrderID, sh.RequestKey).Limit(1).Find(&rows).Error; err != nil {
				return fmt.Errorf("%s: find the request's shipment: %w", what, err)
			}
			if len(rows) == 1 {
				before = &rows[0]
				return errShippedBefore // undoes the lock's version: nothing changed
			}
		}
		o, err := s.FindByID(ctx, sh.OrderID)
		if err != nil {
			return err
		}
		lines, event, err := plan(o)
		if err != nil {
			return err
		}
		planned := int64(0)
		for _, l := range lines {
			planned += l.Quantity
			ok, err := s.db.guarded(ctx, what, shipLine, l.Quantity, sh.OrderID, l.Position, l.Quantity)
			if err != nil {
				return err
			}
			if !ok { // the lock makes this impossible; the guard stands anyway
				return fmt.Errorf("%s: line %d cannot ship %d more units", what, l.Position, l.Quantity)
			}
		}
		if planned != asked || planned == 0 { // the shipment's lines are what it records: they must be what ships
			return fmt.Errorf("%s: the plan ships %d units, the shipment lists %d", what, planned, asked)
		}
		ok, err := s.db.guarded(ctx, what, shipOrder[event], sh.OrderID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s: its fulfilment cannot take %s: %w", what, event, domain.ErrInvalidTransition)
		}
		if err := s.db.create(ctx, &shipmentRow{ID: sh.ID, OrderID: sh.OrderID, Carrier: sh.Carrier, TrackingNumber: sh.TrackingNumber,
			RequestKey: nullable(sh.RequestKey), Fingerprint: nullable(sh.RequestFingerprint), CreatedAt: ts(now)}); err != nil {
			return fmt.Errorf("%s: write the shipment: %w", what, err)
		}
		items := make([]shipmentItemRow, len(sh.Items))
		for i, l := range sh.Items {
			items[i] = shipmentItemRow{ShipmentID: sh.ID, Position: i, SKU: l.SKU, Quantity: l.Quantity}
		}
		if err := s.db.create(ctx, &items); err != nil {
			return fmt.Errorf("%s: write the shipment's lines: %w", what, err)
		}
		ev := statement{query: insertShippedEvent, args: []any{eventID, string(domain.NotifyOrderShipped), string(c.Kind), ref, ts(now), sh.ID, sh.OrderID}}
		if err := s.db.writeEvent(ctx, what, ev); err != nil {
			return err
		}
		fault("order_shipped")
		return nil
	})
	switch {
	case errors.Is(err, errShippedBefore):
		if fp := before.Fingerprint; fp != nil && *fp != "" && sh.RequestFingerprint != "" && *fp != sh.RequestFingerprint {
			return domain.Order{}, domain.Shipment{}, domain.ErrKeyReused
		}
		sh.ID = before.ID
	case errors.Is(err, domain.ErrOrderNotFound):
		return domain.Order{}, domain.Shipment{}, domain.ErrOrderNotFound
	case err != nil:
		return domain.Order{}, domain.Shipment{}, err
	}
	o, err := s.FindByID(ctx, sh.OrderID)
	if err != nil {
		return domain.Order{}, domain.Shipment{}, err
	}
	if o.Shipments, err = s.ShipmentsOf(ctx, sh.OrderID); err != nil {
		return domain.Order{}, domain.Shipment{}, err
	}
	for _, got := range o.Shipments {
		if got.ID == sh.ID {
			return o, got, nil
		}
	}
	return domain.Order{}, domain.Shipment{}, fmt.Errorf("%s: shipment %s was written but not read back", what, sh.ID)
}

// errShippedBefore undoes Ship's transaction when the request's shipment
// is already there.
var errShippedBefore = errors.New("the request's shipment is already there")

// nullable stores an empty string as NULL.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ShipmentsOf returns order id's shipments, oldest first, with their
// lines.
func (s *OrderStore) ShipmentsOf(ctx context.Context, id string) ([]domain.Shipment, error) {
	var rows []shipmentRow
	if err := s.db.conn(ctx).Where("order_id = ?", id).Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list shipments of order %s: %w", id, err)
	}
	out, err := s.withLines(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("list shipments of order %s: %w", id, err)
	}
	return out, nil
}

// shipmentsByID returns the shipments ids that exist, by ID.
func (s *OrderStore) shipmentsByID(ctx context.Context, ids []string) (map[string]domain.Shipment, error) {
	out := make(map[string]domain.Shipment, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []shipmentRow
	if err := s.db.conn(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("find %d shipments: %w", len(ids), err)
	}
	list, err := s.withLines(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("find %d shipments: %w", len(ids), err)
	}
	for _, sh := range list {
		out[sh.ID] = sh
	}
	return out, nil
}

// withLines turns shipment rows into shipments with their lines: one
// more query, whatever their number.
func (s *OrderStore) withLines(ctx context.Context, rows []shipmentRow) ([]domain.Shipment, error) {
	out := make([]domain.Shipment, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	var items []shipmentItemRow
	if err := s.db.conn(ctx).Where("shipment_id IN ?", ids).Order("shipment_id, position").Find(&items).Error; err != nil {
		return nil, err
	}
	lines := make(map[string][]domain.ShipLine, len(rows))
	for _, it := range items {
		lines[it.ShipmentID] = append(lines[it.ShipmentID], domain.ShipLine{SKU: it.SKU, Quantity: it.Quantity})
	}
	for i, r := range rows {
		out[i] = domain.Shipment{ID: r.ID, OrderID: r.OrderID, Items: lines[r.ID], Carrier: r.Carrier,
			TrackingNumber: r.TrackingNumber, CreatedAt: r.CreatedAt.time()}
	}
	return out, nil
}
