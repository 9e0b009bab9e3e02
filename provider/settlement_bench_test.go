package provider

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/google/uuid"

	"github.com/payd/payd/domain"
)

// BenchmarkSettlement checks a settlement file of a busy day — 100,000
// lines: 95,000 charges under payd's keys and 5,000 refunds of them, named
// by id, some 16 MiB — and walks its pages, as an upload's run does. Beside
// the time and the bytes allocated it reports the live heap (after a
// collection) beyond the file itself, in MiB: check-MiB, what the first
// reading holds at its largest (a key, a line, an amount a charge); held-MiB,
// what payd holds from the end of the check through the run's walk; and
// charges-MiB, what holding the day's charges would cost, as payd did
// before reading a file twice (ADR 0066).
func BenchmarkSettlement(b *testing.B) {
	file := busySettlement(95_000, 5_000)
	open := func() (io.Reader, error) { return bytes.NewReader(file), nil }
	base := liveMiB()

	c, err := checkSettlement(bytes.NewReader(file))
	if err != nil {
		b.Fatal(err)
	}
	check := liveMiB() - base
	runtime.KeepAlive(c) // c is not used after this: the check's state goes
	var all []domain.Charge
	s, err := ParseSettlement(open)
	if err == nil {
		err = s.Charges(func(page []domain.Charge) error { all = append(all, page...); return nil })
	}
	if err != nil || len(all) != 95_000 {
		b.Fatalf("ParseSettlement = %d charges, %v; want 95000", len(all), err)
	}
	charges := liveMiB() - base
	runtime.KeepAlive(all)
	all = nil

	b.ReportAllocs()
	b.SetBytes(int64(len(file)))
	var held float64
	for b.Loop() {
		s, err := ParseSettlement(open)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		held = liveMiB() - base
		b.StartTimer()
		n := 0
		if err := s.Charges(func(page []domain.Charge) error { n += len(page); return nil }); err != nil || n != 95_000 {
			b.Fatalf("walk = %d charges, %v; want 95000", n, err)
		}
	}
	b.ReportMetric(float64(len(file))/(1<<20), "file-MiB")
	b.ReportMetric(check, "check-MiB")
	b.ReportMetric(held, "held-MiB")
	b.ReportMetric(charges, "charges-MiB")
}

// liveMiB is the live heap, in MiB, once collected.
func liveMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// busySettlement writes a settlement file with the refund_id column: n
// succeeded charges under payd's keys, and a refund of each of the first
// refunds of them.
func busySettlement(n, refunds int) []byte {
	var buf bytes.Buffer
	buf.WriteString("charge_id,idempotency_key,order_id,type,status,amount,currency,created_at,refund_id\n")
	for i := range n {
		fmt.Fprintf(&buf, "ch_%024d,%s,%s,charge,succeeded,%d.%02d,USD,2026-01-31T12:%02d:%02d.123456Z,\n", i, uuid.NewString(), uuid.NewString(), 10+i%990, i%100, i/60%60, i%60)
	}
	for i := range refunds {
		fmt.Fprintf(&buf, "ch_%024d,%s,,refund,succeeded,5.00,USD,2026-01-31T13:00:00Z,re_%024d\n", i, uuid.NewString(), i)
	}
	return buf.Bytes()
}
