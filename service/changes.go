package service

import "sync"

// Changes tells this process's order-event streams that an order changed,
// so a subscriber hears about it at once. Changes made by other payd
// processes reach subscribers through polling (see handler's event stream)
// or, with Redis, through redisx's notifications:
// this is a shortcut, not the source of truth. It is an Observer (of order
// changes only) and the OrderFeed of Orders.
type Changes struct {
	NopObserver

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a signal after each change of
// the order, and a function that ends the subscription.
func (c *Changes) Subscribe(orderID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	if c.subs == nil {
		c.subs = make(map[string]map[chan struct{}]struct{})
	}
	if c.subs[orderID] == nil {
		c.subs[orderID] = make(map[chan struct{}]struct{})
	}
	c.subs[orderID][ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs[orderID], ch)
		if len(c.subs[orderID]) == 0 {
			delete(c.subs, orderID)
		}
		c.mu.Unlock()
	}
}

// OrderChanged signals every subscriber of the order. It never blocks: a
// subscriber with a signal already pending needs no second one.
func (c *Changes) OrderChanged(orderID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.subs[orderID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Resync signals every subscriber of every order: changes made elsewhere
// may have gone unheard (the notifications from other processes were
// down), so each stream looks at its order once.
func (c *Changes) Resync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, subs := range c.subs {
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
