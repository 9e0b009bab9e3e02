package repository_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/internal/testdeps"
	"github.com/payd/payd/repository"
)

// galeraURLs are server URLs of the nodes of a running MariaDB Galera
// cluster (PAYD_TEST_GALERA_URLS, comma-separated, e.g.
// mysql://root:@127.0.0.1:4306/mysql,mysql://root:@127.0.0.1:4307/mysql);
// tests that need them skip without.
func galeraURLs(tb testing.TB) []string {
	tb.Helper()
	u := os.Getenv("PAYD_TEST_GALERA_URLS")
	if u == "" {
		testdeps.Skip(tb, testdeps.Galera, "PAYD_TEST_GALERA_URLS not set: no Galera cluster to test on")
	}
	return strings.Split(u, ",")
}

func galeraURL(tb testing.TB) string { return galeraURLs(tb)[0] }

// galeraDatabase creates a migrated database on the cluster and returns
// its URL on every node; a cleanup drops it.
func galeraDatabase(t testing.TB, servers []string) []string {
	t.Helper()
	ctx := context.Background()
	name := "payd_g_" + strings.ReplaceAll(newID(), "-", "")[:16]
	server, err := repository.Open(ctx, servers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if err := server.Gorm().Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin").Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s, err := repository.Open(ctx, servers[0])
		if err == nil {
			err = s.Gorm().Exec("DROP DATABASE IF EXISTS " + name).Error
			s.Close()
		}
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	out := make([]string, len(servers))
	for i, s := range servers {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		out[i] = u.String()
	}
	db := openGalera(t, out[0])
	if err := repository.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return out
}

func openGalera(t testing.TB, u string) *repository.DB {
	t.Helper()
	db, err := repository.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestGaleraClaimRace claims each of 50 orders from two nodes at once, in
// transactions as Checkout does. A losing node's UPDATE may match and its
// COMMIT fail certification (1213); run again, it matches nothing. Exactly
// one claim wins per order and no caller sees an error.
func TestGaleraClaimRace(t *testing.T) {
	servers := galeraURLs(t)
	if len(servers) < 2 {
		t.Skip("PAYD_TEST_GALERA_URLS names one node; the race needs two")
	}
	urls := galeraDatabase(t, servers[:2])
	dbs := []*repository.DB{openGalera(t, urls[0]), openGalera(t, urls[1])}
	var mu sync.Mutex
	retries := map[domain.RetryReason]int{}
	for _, db := range dbs {
		db.OnRetry(func(_ context.Context, reason domain.RetryReason, _ int, _ error) {
			mu.Lock()
			retries[reason]++
			mu.Unlock()
		})
	}
	const orders = 50
	wins := 0
	for range orders {
		o := newOrder(t, dbs[0])
		won := make([]bool, len(dbs))
		errs := make([]error, len(dbs))
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() {
				store := repository.NewOrderStore(db)
				errs[i] = repository.NewTransactor(db).InTx(t.Context(), func(ctx context.Context) error {
					won[i] = false // run again after a conflict: start clean
					var err error
					won[i], err = store.Claim(ctx, o.ID, "req-"+string(rune('a'+i)), o.Version, t0)
					return err
				})
			})
		}
		wg.Wait()
		n := 0
		for i := range dbs {
			if errs[i] != nil {
				t.Errorf("order %s: node %d InTx(claim) = %v", o.ID, i, errs[i])
			}
			if won[i] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("order %s: %d claims won, want 1", o.ID, n)
		}
		wins += n
	}
	t.Logf("%d orders, %d claims won, retries %v", orders, wins, retries)
}

// TestGaleraSessions: payd recognises a Galera node, and every session
// waits for the cluster before it reads (wsrep_sync_wait=1), unless the URL
// chose another value.
func TestGaleraSessions(t *testing.T) {
	url := galeraURL(t)
	for _, tt := range []struct{ url, want string }{
		{url, "1"},
		{withParam(url, "wsrep_sync_wait=0"), "0"},
	} {
		db, err := repository.Open(t.Context(), tt.url)
		if err != nil {
			t.Fatalf("Open(galera) = %v", err)
		}
		if !db.Galera() {
			t.Errorf("Galera() = false on a Galera node")
		}
		var got string
		if err := db.Gorm().WithContext(t.Context()).Raw("SELECT @@wsrep_sync_wait").Scan(&got).Error; err != nil || got != tt.want {
			t.Errorf("wsrep_sync_wait = %q, %v; want %q", got, err, tt.want)
		}
		db.Close()
	}
}

// BenchmarkGaleraRead measures what wsrep_sync_wait=1 (payd's setting on
// a Galera node) costs a read, against 0:
//
//   - read: a primary-key read on node 2 while nothing is written: the
//     wait is one round trip to the cluster to learn there is nothing to
//     apply;
//   - read_after_write: node 1 commits an UPDATE of the row, then node 2
//     reads it — the read the setting is for (a replay, GET
//     /v1/requests/{key}, an order read after a pay on another replica).
//     Its ns/op includes the write. stale/op is the share of reads that
//     missed the write just committed: 0 with the wait, by construction.
//
// Compare with benchstat, columns by setting (docs/operations.md, "Running on a
// Galera cluster", has the interleaved command):
//
//	benchstat -col /wsrep_sync_wait galera-read.txt
func BenchmarkGaleraRead(b *testing.B) {
	servers := galeraURLs(b)
	if len(servers) < 2 {
		b.Skip("PAYD_TEST_GALERA_URLS names one node: the benchmark reads on a second one")
	}
	urls := galeraDatabase(b, servers[:2])
	writer := openGalera(b, urls[0])
	if err := writer.Gorm().Exec("CREATE TABLE bench_read (id INT PRIMARY KEY, n BIGINT NOT NULL)").Error; err != nil {
		b.Fatal(err)
	}
	if err := writer.Gorm().Exec("INSERT INTO bench_read VALUES (1, 0)").Error; err != nil {
		b.Fatal(err)
	}
	var written int64
	for _, wait := range []string{"1", "0"} {
		reader := openGalera(b, withParam(urls[1], "wsrep_sync_wait="+wait))
		read := func() int64 {
			var n int64
			if err := reader.Gorm().Raw("SELECT n FROM bench_read WHERE id = 1").Scan(&n).Error; err != nil {
				b.Fatal(err)
			}
			return n
		}
		b.Run("read/wsrep_sync_wait="+wait, func(b *testing.B) {
			for b.Loop() {
				read()
			}
		})
		b.Run("read_after_write/wsrep_sync_wait="+wait, func(b *testing.B) {
			stale := 0
			for b.Loop() {
				written++
				if err := writer.Gorm().Exec("UPDATE bench_read SET n = ? WHERE id = 1", written).Error; err != nil {
					b.Fatal(err)
				}
				if read() != written {
					stale++
				}
			}
			b.ReportMetric(float64(stale)/float64(b.N), "stale/op")
		})
	}
}

func withParam(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// TestGaleraPayBatchClaimRace claims each of 30 orders from every node at
// once through PayBatch.Claim (the claim and its attempt in one packet, as
// Checkout sends them). A losing node's packet may match and its COMMIT
// fail certification; whatever happens, exactly one claim reports a win,
// and that claim is the one the cluster holds, with its attempt.
func TestGaleraPayBatchClaimRace(t *testing.T) {
	servers := galeraURLs(t)
	if len(servers) < 2 {
		t.Skip("PAYD_TEST_GALERA_URLS names one node; the race needs two")
	}
	urls := galeraDatabase(t, servers)
	var dbs []*repository.DB
	for _, u := range urls {
		dbs = append(dbs, openGalera(t, u))
	}
	for range 30 {
		o := newOrder(t, dbs[0])
		won := make([]bool, len(dbs))
		errs := make([]error, len(dbs))
		reqs := make([]string, len(dbs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, db := range dbs {
			reqs[i] = "req-" + string(rune('a'+i))
			wg.Go(func() {
				a := attemptFor(o, reqs[i])
				<-start
				won[i], errs[i] = repository.NewPayBatch(db).Claim(t.Context(), a, o.Version, t0)
			})
		}
		close(start)
		wg.Wait()
		var winners []string
		for i := range dbs {
			if errs[i] != nil {
				t.Errorf("order %s: node %d PayBatch.Claim = %v", o.ID, i+1, errs[i])
			}
			if won[i] {
				winners = append(winners, reqs[i])
			}
		}
		got := findOrder(t, dbs[0], o.ID)
		as := attemptsOf(t, dbs[0], o.ID)
		if len(winners) != 1 || got.PayRequestID != winners[0] || len(as) != 1 || as[0].RequestID != winners[0] {
			t.Errorf("order %s: claims won by %v; the cluster holds the order claimed by %q with attempts %+v: want one winner, the one held",
				o.ID, winners, got.PayRequestID, as)
		}
	}
}

// TestGaleraShipRace ships each of 20 orders' line of 2 units from three
// nodes at once, one unit each, in Ship's own transactions: a shipment
// whose COMMIT fails certification runs again from the order's lock, so
// exactly two ship per order, the third is refused as too many, and the
// line, the shipments and the events agree.
func TestGaleraShipRace(t *testing.T) {
	servers := galeraURLs(t)
	if len(servers) < 3 {
		t.Skip("PAYD_TEST_GALERA_URLS names fewer than three nodes")
	}
	urls := galeraDatabase(t, servers[:3])
	dbs := []*repository.DB{openGalera(t, urls[0]), openGalera(t, urls[1]), openGalera(t, urls[2])}
	s0 := repository.NewOrderStore(dbs[0])
	stores := []*repository.OrderStore{s0, repository.NewOrderStore(dbs[1]), repository.NewOrderStore(dbs[2])}
	for range 20 {
		o := paidMugs(t, dbs[0], 2)
		shipped := shipRace(t, o.ID, stores)
		got := findOrder(t, dbs[0], o.ID)
		list, err := s0.ShipmentsOf(t.Context(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if shipped != 2 || got.Items[0].Shipped != 2 || len(list) != 2 || got.Fulfillment != domain.FulfillmentShipped {
			t.Errorf("order %s: %d shipped, line %d, %d stored, %s; want 2, 2, 2, shipped", o.ID, shipped, got.Items[0].Shipped, len(list), got.Fulfillment)
		}
	}
}

// TestGaleraHoldRace: captures and voids of one hold claimed from three
// Galera nodes at once, on each of twenty orders: exactly one owns each
// hold (a claim that lost certification is run again by InTx and then
// finds the hold owned).
func TestGaleraHoldRace(t *testing.T) {
	servers := galeraURLs(t)
	if len(servers) < 3 {
		t.Skip("PAYD_TEST_GALERA_URLS names fewer than three nodes")
	}
	urls := galeraDatabase(t, servers[:3])
	dbs := []*repository.DB{openGalera(t, urls[0]), openGalera(t, urls[1]), openGalera(t, urls[2])}
	racers := []*repository.DB{dbs[0], dbs[1], dbs[2], dbs[0], dbs[1], dbs[2]}
	for range 20 {
		o := heldMugs(t, dbs[0], 2, t0.Add(time.Hour))
		winner, _ := holdRace(t, o, racers)
		if got := findOrder(t, dbs[0], o.ID); got.HoldAction != winner.ID {
			t.Errorf("order %s: owned by %q, want the winner %s", o.ID, got.HoldAction, winner.ID)
		}
	}
}
