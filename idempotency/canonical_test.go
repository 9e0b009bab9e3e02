package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

// flatSeeds are bodies canonicalFlat takes and bodies it must leave to
// canonicalDecoded.
var flatSeeds = []string{
	`{"payment_method":"pm_ok"}`,
	` { "b" : 1 , "a" : "x" , "request_id" : "k-1" } `,
	`{"request_id":"k","payment_method":"pm_ok"}`,
	`{"currency":"USD","amount":-0.10e+3,"n":0,"t":true,"f":false,"z":null,"big":12345678901234567890}`,
	`{}`, "{\n\t\"a\":\"b\"\r\n}", `{"":""}`,
	// left to canonicalDecoded:
	`{"items":[{"sku":"s"}]}`, `{"a":{"b":1}}`, `{"a":"\u00e9"}`, `{"a":"é"}`, `{"a":"<b>"}`, `{"a":"x&y"}`,
	`{"a":"q\"q"}`, `{"a":1,"a":2}`, `{"request_id":5}`, `{"request_id":null}`, `{"a":01}`, `{"a":1.}`,
	`{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":tru}`, `{"a":truex}`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":1}{}`,
	`{"a":1} x`, `[1,2]`, `"s"`, `5`, ``, `   `, "{\"a\":\"\x7f\"}", "{\"a\":\"\x01\"}", `{"a":1`, `{"a":"b`,
	"\xef\xbb\xbf{}", `{"request_id":"k","request_id":"k"}`,
}

// TestCanonicalFlatMatchesDecoded: wherever the fast path answers, it
// answers exactly what decoding and encoding again gives; the usual pay
// body takes the fast path.
func TestCanonicalFlatMatchesDecoded(t *testing.T) {
	for _, body := range flatSeeds {
		checkFlat(t, []byte(body))
	}
	if _, _, ok := canonicalFlat([]byte(`{"payment_method":"pm_ok"}`)); !ok {
		t.Errorf("canonicalFlat(pay body) declined, want the fast path")
	}
}

func FuzzCanonicalFlat(f *testing.F) {
	for _, body := range flatSeeds {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkFlat(t, body) })
}

func checkFlat(t *testing.T, body []byte) {
	t.Helper()
	out, key, ok := canonicalFlat(body)
	if !ok {
		return
	}
	want, wantKey, err := canonicalDecoded(body)
	if err != nil || !bytes.Equal(out, want) || key != wantKey {
		t.Errorf("canonicalFlat(%q) = %q, %q; canonicalDecoded = %q, %q, %v", body, out, key, want, wantKey, err)
	}
}

// TestCanonicalBodyErrors: the bodies the fast path declines are still
// judged as before.
func TestCanonicalBodyErrors(t *testing.T) {
	for _, body := range []string{`{"a":1,"a":}`, `{"a":1}{}`, `[`, `{"a":01}`} {
		if _, _, err := canonicalBody([]byte(body)); !errors.Is(err, ErrMalformedBody) {
			t.Errorf("canonicalBody(%q) = %v, want ErrMalformedBody", body, err)
		}
	}
	if _, _, err := canonicalBody([]byte(`{"request_id":5}`)); err == nil {
		t.Errorf("canonicalBody(numeric request_id) = nil error, want a validation error")
	}
}

// TestFingerprintIsStable: the fingerprint is hex SHA-256 over "METHOD\nPATH\n"
// and the canonical body, as stored records were fingerprinted; computing
// it a second time gives the same.
func TestFingerprintIsStable(t *testing.T) {
	c := Call{Method: "POST", Path: "/v1/orders/o1/pay", Body: []byte(`{"payment_method":"pm_ok"}`)}
	sum := sha256.Sum256([]byte("POST\n/v1/orders/o1/pay\n" + `{"payment_method":"pm_ok"}`))
	if got, want := c.Fingerprint(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint() = %s, want %s", got, want)
	}
}

// BenchmarkCanonicalBody compares the fast path with decoding and encoding
// the usual pay body.
//
//	go test -run '^$' -bench BenchmarkCanonicalBody -benchmem ./idempotency
func BenchmarkCanonicalBody(b *testing.B) {
	body := []byte(`{"payment_method":"pm_ok"}`)
	b.Run("flat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = canonicalBody(body)
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = canonicalDecoded(body)
		}
	})
}
