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

// Ship ships sh (its ID, lines, carrier and tracking number) of order
// sh.OrderID as plan decides from the order read under its lock
// (domain.Order.PlanShipment), and
// writes the order.shipped event caused by c, in one transaction (the
// caller's, or one of its own). It returns the order as the shipment left
// it. An order that does not exist is domain.ErrOrderNotFound; whatever
// plan refuses (an order not paid, lines it does not have or has shipped)
// is plan's error, and nothing is written.
func (s *OrderStore) Ship(ctx context.Context, sh domain.Shipment, plan func(domain.Order) ([]domain.LineShipment, domain.FulfillmentEvent, error), c domain.Cause, now time.Time) (domain.Order, error) {
	what := act{"ship order", sh.OrderID}
	eventID, ref, err := eventKeys(domain.NotifyOrderShipped, c)
	if err != nil {
		return domain.Order{}, fmt.Errorf("%s: %w", what, err)
	}
	var shipped domain.Order
	err = s.db.inTx(ctx, func(ctx context.Context) error {
		// The lock: every change of the order raises its version, and
		// this one is the shipment's (its event's seq).
		n, err := s.db.exec(ctx, `UPDATE orders SET version = version + 1, updated_at = ? WHERE id = ?`, ts(now), sh.OrderID)
		if err != nil {
			return fmt.Errorf("%s: lock: %w", what, err)
		}
		if n != 1 {
			return domain.ErrOrderNotFound
		}
		o, err := s.FindByID(ctx, sh.OrderID)
		if err != nil {
			return err
		}
		lines, event, err := plan(o)
		if err != nil {
			return err
		}
		for _, l := range lines {
			ok, err := s.db.guarded(ctx, what, shipLine, l.Quantity, sh.OrderID, l.Position, l.Quantity)
			if err != nil {
				return err
			}
			if !ok { // the lock makes this impossible; the guard stands anyway
				return fmt.Errorf("%s: line %d cannot ship %d more units", what, l.Position, l.Quantity)
			}
		}
		ok, err := s.db.guarded(ctx, what, shipOrder[event], sh.OrderID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s: its fulfilment cannot take %s: %w", what, event, domain.ErrInvalidTransition)
		}
		if err := s.db.create(ctx, &shipmentRow{ID: sh.ID, OrderID: sh.OrderID, Carrier: sh.Carrier,
			TrackingNumber: sh.TrackingNumber, CreatedAt: ts(now)}); err != nil {
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
		if shipped, err = s.FindByID(ctx, sh.OrderID); err != nil {
			return err
		}
		shipped.Shipments, err = s.ShipmentsOf(ctx, sh.OrderID)
		return err
	})
	if err != nil {
		if errors.Is(err, domain.ErrOrderNotFound) {
			return domain.Order{}, domain.ErrOrderNotFound
		}
		return domain.Order{}, err
	}
	return shipped, nil
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
