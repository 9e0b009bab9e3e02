package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/payd/payd/internal/preload"
)

// The operators' reads, measured after payd's pays: what the console and
// `payd admin` ask for, each alone, at up to readClients at once (a few
// operators, not the shop's traffic). On a preloaded database (-preload)
// they read the preload's orders and customers, and page deep into them;
// on an empty one, the run's own.

// readClients is how many operators read at once.
const readClients = 4

// readPrefix names the reads' phases in the report; the chart leaves them
// out (it compares payd with the floor, which has no reads).
const readPrefix = "read: "

// adminRead is one kind of read: its name and the request path of its
// i-th request.
type adminRead struct {
	name string
	path func(i int) string
}

// adminReads lists the reads, on the preload when there is one.
func (b *bench) adminReads(now time.Time) []adminRead {
	stamp := func(t time.Time) string { return url.QueryEscape(t.UTC().Format(time.RFC3339)) }
	order, customer, email, timeline, deep := b.readTargets()
	window := now.Add(-45 * 24 * time.Hour)
	reads := []adminRead{
		{"orders, first page", func(int) string { return "/v1/admin/orders?limit=20" }},
		{"orders, deep page", func(i int) string { return "/v1/admin/orders?limit=20&cursor=" + deep(i) }},
		{"orders by status", func(int) string { return "/v1/admin/orders?limit=20&status=expired" }},
		{"orders by customer ID", func(i int) string { return "/v1/admin/orders?limit=20&customer=" + customer(i) }},
		{"orders by customer email", func(i int) string { return "/v1/admin/orders?limit=20&customer=" + url.QueryEscape(email(i)) }},
		{"orders in an hour 45 days ago", func(int) string {
			return "/v1/admin/orders?limit=20&from=" + stamp(window) + "&to=" + stamp(window.Add(time.Hour))
		}},
		{"orders with a declined payment", func(int) string { return "/v1/admin/orders?limit=20&attempt=failed" }},
		{"order timeline", func(i int) string { return "/v1/admin/orders/" + timeline(i) }},
		{"order timeline, paid", func(i int) string { return "/v1/admin/orders/" + order(i) }},
		{"stats, 24 h by hour", func(int) string { return "/v1/admin/stats?bucket=hour&from=" + stamp(now.Add(-24*time.Hour)) }},
		{"stats, 90 days by day", func(int) string { return "/v1/admin/stats?bucket=day&from=" + stamp(now.Add(-90*24*time.Hour)) }},
		{"customers, first page", func(int) string { return "/v1/admin/customers?limit=20" }},
		{"discrepancies, first page", func(int) string { return "/v1/admin/discrepancies?limit=20" }},
		{"disputes, first page", func(int) string { return "/v1/admin/disputes?limit=20" }},
		{"reconciliations, first page", func(int) string { return "/v1/admin/reconciliations?limit=20" }},
		{"endpoints with their health", func(int) string { return "/v1/admin/endpoints" }},
	}
	if b.o.preload > 0 {
		reads = append(reads, adminRead{"an endpoint's deliveries", func(int) string {
			return "/v1/admin/endpoints/" + preload.Endpoint + "/deliveries?limit=20"
		}})
	}
	return reads
}

// readTargets are what the reads ask about, by request number: an order,
// a customer's ID and email, an order with a refund (its timeline is the
// longest), and a cursor deep in the orders.
func (b *bench) readTargets() (order, customer, email, timeline, deep func(int) string) {
	if n := b.o.preload; n > 0 {
		customers := max(1, n/10)
		pick := func(i, of int) int { return (i*7919 + 13) % of }
		order = func(i int) string { return preload.ID("8000", pick(i, n)) }
		customer = func(i int) string { return preload.ID("8001", pick(i, customers)) }
		email = func(i int) string { return fmt.Sprintf("c%d@preload.example", pick(i, customers)) }
		timeline = func(i int) string { return preload.ID("8000", 80+100*pick(i, max(1, n/100))) } // refunded (i mod 100 = 80)
		deep = func(i int) string { return preload.ID("8000", n/2+pick(i, max(1, n/4))) }
		return
	}
	pick := func(i int) int { return (i*7919 + 13) % b.o.requests }
	order = func(i int) string { return b.orders[pick(i)] }
	customer = func(i int) string { return b.customerOf(pick(i)).ID }
	email = func(i int) string { return b.customerOf(pick(i)).Email }
	timeline = order
	deep = func(i int) string { return b.orders[len(b.orders)/2+pick(i)%(len(b.orders)/2)] }
	return
}

// reads measures each of the operators' reads: -reads requests of each
// (by default max(20, -n/20)).
func (b *bench) reads(ctx context.Context) error {
	n := b.o.reads
	if n < 0 {
		n = max(20, b.o.requests/20)
	}
	if n == 0 {
		return nil
	}
	// A read that scans a grown table may take far longer than a pay: it
	// is timed, not cut off.
	slow := &client{base: b.api.base, hc: &http.Client{Transport: b.api.hc.Transport, Timeout: 10 * time.Minute}}
	for _, r := range b.adminReads(time.Now()) {
		do := func(ctx context.Context, i int) error { return slow.get(ctx, r.path(i), adminToken) }
		if err := b.phaseAt(ctx, "payd", readPrefix+r.name, min(readClients, b.o.clients), n, do); err != nil {
			return err
		}
	}
	return nil
}

// get reads path with token and wants a 200, reading the whole answer.
func (c *client) get(ctx context.Context, path, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d: %.200s", strings.SplitN(path, "?", 2)[0], resp.StatusCode, body)
	}
	return nil
}
