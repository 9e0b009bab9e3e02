package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
)

// bench is one run's state: the customers and orders made through payd,
// which the later phases pay, replay and hand to the floor.
type bench struct {
	o   options
	db  *database
	rep *report
	pid int // payd's process, while it runs; 0 after
	// serverPID is the database server's process when it runs on this
	// machine (MariaDB or MySQL, found in /proc); 0 otherwise.
	serverPID int
	api       *client

	customers []customer
	orders    []string // 2n: the first n paid through payd, the rest by the floor
	keys      []string // the keys of payd's new pays, replayed next
	reply     []byte   // one of payd's pay answers
}

// payd drives payd: registration (one customer per client), orders (for
// payd's pays and the floor's), new pays, replays of those pays.
func (b *bench) payd(ctx context.Context) error {
	n := b.o.requests
	b.customers = make([]customer, b.o.clients)
	b.orders = make([]string, b.floorSets()*n+n)
	b.keys = make([]string, n)
	steps := []struct {
		name string
		n    int
		do   func(context.Context, int) error
	}{
		{"register", b.o.clients, b.register},
		{"create order", len(b.orders), b.createOrder},
		{"new pay", n, b.pay},
		{"replay", n, b.replay},
		// Last, so the pays are measured on the orders table they always
		// were: what a creation costs when it takes counted stock (one
		// guarded UPDATE more in its transaction), next to "create order"
		// of the unlimited product.
		{"create order, stock", n, b.createStockOrder},
	}
	// What the buyers order: only the merchant prices it. The counted
	// product holds more than the phase takes, so no order is short.
	if err := b.api.createProduct(ctx, merchantKey, "bench-product-"+runTag, productBody); err != nil {
		return err
	}
	stock := stockFor(n)
	if err := b.api.createProduct(ctx, merchantKey, "bench-stock-product-"+runTag, fmt.Sprintf(stockProductBody, stock)); err != nil {
		return err
	}
	for _, s := range steps {
		if err := b.phase(ctx, "payd", s.name, s.n, s.do); err != nil {
			return err
		}
	}
	// Each creation took its unit once: what is left says so.
	if left, err := b.api.stockOf(ctx, stockSKU); err != nil {
		return err
	} else if left != stock-int64(n) {
		return fmt.Errorf("%s: stock %d after %d orders of %d, want %d", stockSKU, left, n, stock, stock-int64(n))
	}
	return b.reads(ctx)
}

// stockFor is the counted product's stock for a run of n orders of it:
// twice what the phase takes.
func stockFor(n int) int64 { return 2 * int64(n) }

func (b *bench) register(ctx context.Context, i int) error {
	c, err := b.api.register(ctx, i, uuid.NewString())
	b.customers[i] = c
	return err
}

// customerOf spreads orders over the customers round robin.
func (b *bench) customerOf(i int) customer { return b.customers[i%len(b.customers)] }

func (b *bench) createOrder(ctx context.Context, i int) error {
	id, err := b.api.createOrder(ctx, b.customerOf(i).Token)
	b.orders[i] = id
	return err
}

// createStockOrder orders one unit of the counted product; these orders
// are not paid.
func (b *bench) createStockOrder(ctx context.Context, i int) error {
	_, err := b.api.createOrderOf(ctx, b.customerOf(i).Token, stockOrderBody)
	return err
}

func (b *bench) pay(ctx context.Context, i int) error {
	b.keys[i] = uuid.NewString()
	body, err := b.api.pay(ctx, b.customerOf(i).Token, b.orders[i], b.keys[i], false)
	if i == 0 {
		b.reply = body
	}
	return err
}

func (b *bench) replay(ctx context.Context, i int) error {
	_, err := b.api.pay(ctx, b.customerOf(i).Token, b.orders[i], b.keys[i], true)
	return err
}

// floor runs the raw-SQL floor on the orders set aside for it, with payd
// stopped: new pays, then replays of them.
func (b *bench) floor(ctx context.Context) error {
	b.pid = 0
	db, read, err := b.db.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if read != db {
		defer read.Close()
	}
	pays, err := b.floorPays(ctx, read, b.o.requests)
	if err != nil {
		return err
	}
	f := &floor{db: db, read: read, reply: b.reply}
	do := func(op func(context.Context, floorPay) error, pays []floorPay) func(context.Context, int) error {
		return func(ctx context.Context, i int) error { return op(ctx, pays[i]) }
	}
	if err := b.phase(ctx, "floor", "new pay", len(pays), do(f.pay, pays)); err != nil {
		return err
	}
	if err := b.phase(ctx, "floor", "replay", len(pays), do(f.replay, pays)); err != nil {
		return err
	}
	if b.floorSets() < 2 {
		return nil
	}
	// The same statements sent as payd sends them on MySQL (PayBatch).
	batched, err := b.db.openMySQL(ctx, true)
	if err != nil {
		return err
	}
	defer batched.Close()
	more, err := b.floorPays(ctx, read, 2*b.o.requests)
	if err != nil {
		return err
	}
	fb := &floor{db: batched, read: batched, reply: b.reply, batched: true}
	return b.phase(ctx, "floor", "new pay, batched", len(more), do(fb.pay, more))
}

// floorSets is how many sets of -n orders the floor pays: on MySQL a
// second set for the batched floor.
func (b *bench) floorSets() int {
	if b.db.Dialect == "mysql" {
		return 2
	}
	return 1
}

// floorPays lists the floor's pays: the orders payd did not pay, each with
// its customer's token hash as payd stored it, under a fresh key.
func (b *bench) floorPays(ctx context.Context, db *sql.DB, from int) ([]floorPay, error) {
	hashes := map[string]string{}
	rows, err := db.QueryContext(ctx, "SELECT id, token_hash FROM customers")
	if err != nil {
		return nil, fmt.Errorf("read customers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, hash string
		if err := rows.Scan(&id, &hash); err != nil {
			return nil, err
		}
		hashes[id] = hash
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	n := b.o.requests
	pays := make([]floorPay, n)
	for i := range pays {
		c := b.customerOf(from + i)
		pays[i] = floorPay{orderID: b.orders[from+i], customerID: c.ID, tokenHash: hashes[c.ID], key: uuid.NewString()}
	}
	return pays, nil
}

// phase runs one measured phase against target and adds it to the report;
// any failed request fails the run, since its figures would be wrong.
func (b *bench) phase(ctx context.Context, target, name string, n int, do func(context.Context, int) error) error {
	return b.phaseAt(ctx, target, name, b.o.clients, n, do)
}

// phaseAt is phase with c clients.
func (b *bench) phaseAt(ctx context.Context, target, name string, c, n int, do func(context.Context, int) error) error {
	before, err := b.sample(ctx)
	if err != nil {
		return err
	}
	r := drive(ctx, c, n, do)
	after, err := b.sample(ctx)
	if err != nil {
		return err
	}
	if r.errors > 0 && !strings.HasPrefix(name, readPrefix) {
		return fmt.Errorf("%s %s: %d of %d requests failed, the first: %w", target, name, r.errors, n, r.firstErr)
	}
	p := newPhase(target, name, n, r, before, after)
	if r.errors > 0 {
		p.Failed, p.FirstError = r.errors, r.firstErr.Error()
	}
	b.rep.add(p)
	return nil
}

// sample is what is read around a phase: payd's CPU time (while it runs)
// and the server's statement counters (MySQL).
type sample struct {
	cpu      time.Duration
	hasCPU   bool
	self     time.Duration // this process: the HTTP client, or the floor
	hasSelf  bool
	server   time.Duration // a database server on this machine
	hasSrv   bool
	counters map[string]int64
}

func (b *bench) sample(ctx context.Context) (sample, error) {
	var s sample
	if b.pid != 0 {
		if cpu, err := cpuTime(b.pid); err == nil {
			s.cpu, s.hasCPU = cpu, true
		}
	}
	if cpu, err := cpuTime(os.Getpid()); err == nil {
		s.self, s.hasSelf = cpu, true
	}
	if b.serverPID != 0 {
		if cpu, err := cpuTime(b.serverPID); err == nil {
			s.server, s.hasSrv = cpu, true
		}
	}
	var err error
	s.counters, err = b.db.counters(ctx)
	return s, err
}
