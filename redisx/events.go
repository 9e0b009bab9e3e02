package redisx

import (
	"context"

	"github.com/payd/payd/service"
)

// Events announces order changes to every replica through Redis pub/sub,
// replacing the event streams' database poll while Redis is up. It is a
// service.Observer of order changes.
type Events struct {
	service.NopObserver
	Redis *Redis
}

// OrderChanged publishes the change; every replica's Listen hands it to
// its event streams (this one's included: a second signal is harmless).
func (e Events) OrderChanged(orderID string) {
	e.Redis.do(context.Background(), func(ctx context.Context) error {
		return e.Redis.client.Publish(ctx, ordersChannel, orderID).Err()
	})
}

// Live reports whether another replica's change reaches this one through
// Redis now; while it does not, the event streams poll the database.
func (e Events) Live() bool { return e.Redis.Live() }
