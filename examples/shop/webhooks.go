package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// webhooks is POST /webhooks/payd: payd's order events (PAYD_NOTIFY_URL),
// signed the Standard Webhooks way with PAYD_NOTIFY_SECRET.
//
//   - The signature (webhook-signature over webhook-id, webhook-timestamp
//     and the body, by any of the secrets) and a timestamp within 5 minutes
//     are checked first, by the Standard Webhooks library payd itself
//     uses. A request that fails is 401 and changes nothing: payd, which
//     signed it, would never send it.
//   - payd delivers at least once, and every retry of one event carries
//     the same webhook-id: the shop acts on each id once, and answers a
//     repeat 204 as it answered the first.
//   - The answer is 204 once the event is recorded. Anything else makes
//     payd try again later.
//
// The shop keeps its orders and the ids it has seen in memory: a real
// shop records both in its database, in the transaction that fulfils the
// order (examples/receiver keeps the ids in SQLite).
type webhooks struct {
	hooks  []*standardwebhooks.Webhook
	orders *orderBook
	log    *slog.Logger
	out    io.Writer
}

func newWebhooks(secrets []string, log *slog.Logger, out io.Writer) (*webhooks, error) {
	w := &webhooks{log: log, out: out}
	for i, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return nil, fmt.Errorf("PAYD_NOTIFY_SECRET: secret %d of %d: %w", i+1, len(secrets), err)
		}
		w.hooks = append(w.hooks, wh)
	}
	return w, nil
}

// orderEvent is what the shop reads of payd's event body
// ({id, type, created_at, cause, order}).
type orderEvent struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Order struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Amount   string `json:"amount"`
		Currency string `json:"currency"`
	} `json:"order"`
}

func (w *webhooks) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		http.Error(rw, "payd's events are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, 1<<20))
	if err != nil {
		http.Error(rw, "the body could not be read", http.StatusBadRequest)
		return
	}
	if !w.verified(body, req.Header) {
		w.log.Warn("payd event refused: bad or stale signature", "webhook_id", req.Header.Get("webhook-id"))
		http.Error(rw, "bad signature", http.StatusUnauthorized)
		return
	}
	id := req.Header.Get("webhook-id")
	var ev orderEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID != id || ev.Order.ID == "" {
		// Signed by payd, but not an event the shop knows how to read:
		// 400 leaves it in payd's delivery log for a person to see.
		http.Error(rw, "not an order event", http.StatusBadRequest)
		return
	}
	first, known := w.orders.apply(id, ev)
	if first {
		note := ""
		if !known {
			note = " (not an order of this shop's page)"
		}
		fmt.Fprintf(w.out, "%s %s order %s is %s (%s %s)%s\n", id, ev.Type, ev.Order.ID, ev.Order.Status, ev.Order.Amount, ev.Order.Currency, note)
	}
	rw.WriteHeader(http.StatusNoContent)
}

// verified is true when any signature of the request is good under any of
// the secrets, and its timestamp recent.
func (w *webhooks) verified(body []byte, h http.Header) bool {
	for _, wh := range w.hooks {
		if wh.Verify(body, h) == nil {
			return true
		}
	}
	return false
}
