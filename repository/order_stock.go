package repository

import (
	"context"
	"fmt"

	"github.com/payd/payd/domain"
)

// Stock is taken like a payment is claimed (ADR 0059): one guarded
// statement per product, judged by its matched rows, so buyers racing for
// the last units never take more than is left; the CHECK (stock >= 0)
// stands behind it. It comes back once, in the transaction of the one
// transition that closes the order unpaid (cancel, expiry): that
// transition's guard matches once, so its give-back runs once.

// takeStockOf is takeStock's statement. A product whose stock is
// unlimited (NULL) matches nothing, but no line takes from one. Taking
// stock leaves updated_at alone: it is the product's edit time, which the
// merchant's updates are guarded by (ProductStore.Update), and a sale is
// no edit.
const takeStockOf = `UPDATE products SET stock = stock - ? WHERE sku = ? AND stock >= ?`

// giveBackStock is what a cancelled or expired order gives back: every
// line's stock_taken to its product, in one statement. An order that took
// nothing matches no product.
const giveBackStock = `UPDATE products
	SET stock = stock + (SELECT SUM(i.stock_taken) FROM order_items i WHERE i.order_id = ? AND i.sku = products.sku)
	WHERE stock IS NOT NULL AND sku IN (SELECT i.sku FROM order_items i WHERE i.order_id = ? AND i.stock_taken > 0)`

// takeStock takes what o's lines take from their products' stock, in the
// caller's transaction; a product that cannot take its quantity is a
// *domain.OutOfStockError, and the caller's transaction is undone.
func (s *OrderStore) takeStock(ctx context.Context, o domain.Order) error {
	take := takeStockOf
	if mutantStock() { // test builds only (mutant_on.go)
		take = takeStockUnguarded
	}
	for _, t := range domain.StockToTake(o.Items) {
		n, err := s.db.exec(ctx, take, t.Quantity, t.SKU, t.Quantity)
		if err != nil {
			return fmt.Errorf("take %d of %s: %w", t.Quantity, t.SKU, err)
		}
		if n != 1 {
			return &domain.OutOfStockError{SKU: t.SKU}
		}
	}
	return nil
}

// closeUnpaid runs transition (a cancel or an expiry of order id) and,
// when it matched, gives back the stock the order took, in one
// transaction (the caller's, or one of its own).
func (s *OrderStore) closeUnpaid(ctx context.Context, id string, transition func(context.Context) (bool, error)) (bool, error) {
	var moved bool
	err := s.db.inTx(ctx, func(ctx context.Context) error {
		ok, err := transition(ctx)
		if err != nil || !ok {
			moved = false
			return err
		}
		if _, err := s.db.exec(ctx, giveBackStock, id, id); err != nil {
			return fmt.Errorf("give back the stock of order %s: %w", id, err)
		}
		moved = true
		return nil
	})
	return moved, err
}
