package service

import (
	"context"
	"fmt"
	"time"

	"github.com/payd/payd/domain"
)

// ShipmentStore is what shipping keeps its shipments in
// (repository.OrderStore).
type ShipmentStore interface {
	// Ship writes shipment sh of order sh.OrderID as plan decides from
	// the order under its lock, with its order.shipped event caused by c,
	// all or nothing, and returns the order as it left it and the
	// shipment. A shipment the order holds under sh.RequestKey is
	// returned as it is (domain.ErrKeyReused under another fingerprint);
	// plan's error is returned as it is.
	Ship(ctx context.Context, sh domain.Shipment, plan func(domain.Order) ([]domain.LineShipment, domain.FulfillmentEvent, error),
		c domain.Cause, now time.Time) (domain.Order, domain.Shipment, error)
}

// Shipments ships the merchant's paid orders (ADR 0060): each shipment is
// one transaction that raises its lines' shipped counts by guarded
// statements, moves the order's fulfilment by its machine, and tells the
// shop with order.shipped. A shipment is asked under an idempotency key
// and keeps it: a repeated request is answered from its record, and one
// that runs again after its answer was lost finds its shipment, so
// nothing ships twice.
type Shipments struct {
	Store ShipmentStore
	Now   func() time.Time
	// Observer is told of each order a shipment changes (its event
	// streams hear of it).
	Observer Observer
}

// Ship ships n of order id for the merchant, under req's key. Bad input
// is a domain.ValidationErrors and nothing is written; so are lines the
// order does not have or has already shipped. An order that is not paid
// is domain.ErrOrderNotPaid; an unknown one domain.ErrOrderNotFound. It
// returns the order as the shipment left it, and the shipment.
func (s *Shipments) Ship(ctx context.Context, req Keyed, id string, n domain.NewShipment) (domain.Order, domain.Shipment, error) {
	if err := n.Check(); err != nil {
		return domain.Order{}, domain.Shipment{}, err
	}
	sh := domain.Shipment{ID: newID(), OrderID: id, Items: n.Items, Carrier: n.Carrier, TrackingNumber: n.TrackingNumber,
		RequestKey: req.Key, RequestFingerprint: req.Fingerprint}
	c := causeIn(ctx, domain.Cause{Kind: domain.CauseMerchant, Ref: sh.ID})
	o, got, err := s.Store.Ship(ctx, sh, func(o domain.Order) ([]domain.LineShipment, domain.FulfillmentEvent, error) {
		return o.PlanShipment(n)
	}, c, s.Now().UTC())
	if err != nil {
		return domain.Order{}, domain.Shipment{}, fmt.Errorf("ship order %s: %w", id, err)
	}
	fault("shipment_made") // test builds: a kill after the commit, before the answer is stored
	if got.ID == sh.ID {   // shipped now, not found from an earlier run
		observing(s.Observer).OrderChanged(id)
	}
	return o, got, nil
}
