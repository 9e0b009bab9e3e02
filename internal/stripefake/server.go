package stripefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

type reply struct {
	status int
	body   any
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeReply(w, reply{400, errBody("invalid_request_error", "parameter_invalid", "", "bad form")})
		return
	}
	status, body, drop := f.answer(r)
	if drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// answer carries the request out under mu and says whether to drop the
// reply. The lock is released by defer, and a panic in a route becomes a
// 500: net/http recovers a handler's panic, so a lock still held then
// would leave every later request of the test waiting for good.
func (f *Fake) answer(r *http.Request) (status int, body []byte, drop bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			status, body, drop = 500, mustJSON(errBody("api_error", "", "", fmt.Sprintf("fake panicked: %v", p))), false
		}
	}()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.noteKeyed(r)
	if f.down {
		return 500, mustJSON(errBody("api_error", "", "", "fake is down")), false
	}
	drop = f.dropReplies > 0
	if drop {
		f.dropReplies--
	}
	key := r.Header.Get("Idempotency-Key")
	if prev, ok := f.keys[r.URL.Path+" "+key]; ok && key != "" && r.Method == http.MethodPost {
		if prev.params != canonical(r.PostForm) {
			return 400, mustJSON(errBody("idempotency_error", "", "", "Keys for idempotent requests can only be used with the same parameters they were first used with.")), drop
		}
		return prev.status, prev.body, drop
	}
	rep := f.route(r)
	status, body = rep.status, mustJSON(rep.body)
	if key != "" && r.Method == http.MethodPost && status < 500 {
		f.keys[r.URL.Path+" "+key] = idemReply{params: canonical(r.PostForm), status: status, body: body}
	}
	return status, body, drop
}

// noteKeyed records a create or retrieve of a PaymentIntent by attempt; the
// caller holds mu.
func (f *Fake) noteKeyed(r *http.Request) {
	switch id, ok := strings.CutPrefix(r.URL.Path, "/v1/payment_intents/"); {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents":
		f.keyed = append(f.keyed, keyedCall{"POST", r.Header.Get("Idempotency-Key")})
	case r.Method == http.MethodGet && ok && f.pis[id] != nil:
		f.keyed = append(f.keyed, keyedCall{"GET", meta(f.pis[id])["payd_attempt"]})
	}
}

func writeReply(w http.ResponseWriter, rep reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = w.Write(mustJSON(rep.body))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func errBody(typ, code, param, msg string) map[string]any {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	return map[string]any{"error": e}
}

var notFound = reply{404, errBody("invalid_request_error", "resource_missing", "id", "No such object")}

// route carries the request out; the caller holds mu.
func (f *Fake) route(r *http.Request) reply {
	p := strings.TrimPrefix(r.URL.Path, "/v1/")
	parts := strings.Split(p, "/")
	switch {
	case r.Method == http.MethodPost && p == "payment_intents":
		return f.createPI(r.PostForm)
	case r.Method == http.MethodGet && p == "payment_intents":
		return f.listPIs(r.Form)
	case r.Method == http.MethodGet && p == "payment_intents/search":
		return f.searchPIs(r.Form.Get("query"))
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "payment_intents" && parts[2] == "cancel":
		return f.cancelPI(parts[1], r.PostForm)
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "payment_intents" && parts[2] == "capture":
		return f.capturePI(parts[1], r.PostForm)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "payment_intents":
		if pi, ok := f.pis[parts[1]]; ok {
			return reply{200, f.expand(pi, expandOf(r.Form))}
		}
		return notFound
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "charges":
		if ch := f.charge(parts[1]); ch != nil {
			return reply{200, f.expand(ch, expandOf(r.Form))}
		}
		return notFound
	case r.Method == http.MethodPost && p == "refunds":
		return f.createRefund(r.PostForm)
	case r.Method == http.MethodGet && p == "refunds":
		return f.list("/v1/refunds", f.refunds, r.Form)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "refunds":
		if x, ok := f.refunds[parts[1]]; ok {
			return reply{200, f.expand(x, expandOf(r.Form))}
		}
		return notFound
	case r.Method == http.MethodGet && p == "disputes":
		return f.list("/v1/disputes", f.disputes, r.Form)
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "disputes":
		if x, ok := f.disputes[parts[1]]; ok {
			return reply{200, f.expand(x, expandOf(r.Form))}
		}
		return notFound
	}
	return reply{404, errBody("invalid_request_error", "", "", "Unrecognized request URL")}
}

func metadataOf(form url.Values) map[string]string {
	m := map[string]string{}
	for k, v := range form {
		if strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]") {
			m[strings.TrimSuffix(strings.TrimPrefix(k, "metadata["), "]")] = v[0]
		}
	}
	return m
}

func (f *Fake) createPI(form url.Values) reply {
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	if err != nil || amount <= 0 {
		return reply{400, errBody("invalid_request_error", "parameter_invalid_integer", "amount", "Invalid integer")}
	}
	if form.Get("currency") == "" {
		return reply{400, errBody("invalid_request_error", "parameter_missing", "currency", "Missing currency")}
	}
	pm := form.Get("payment_method")
	switch pm {
	case PMVisa, PMDeclined, PMInsufficient, PM3DS, PMProcessing:
	default:
		return reply{400, errBody("invalid_request_error", "resource_missing", "payment_method", "No such PaymentMethod: '"+pm+"'")}
	}
	captureMethod := "automatic"
	switch cm := form.Get("capture_method"); cm {
	case "", "automatic":
	case "manual":
		captureMethod = cm
	default:
		return reply{400, errBody("invalid_request_error", "parameter_invalid_string", "capture_method", "Invalid capture_method: "+cm)}
	}
	id := f.id("pi")
	pi := map[string]any{"id": id, "object": "payment_intent", "amount": amount, "amount_received": 0, "amount_capturable": 0,
		"currency": form.Get("currency"), "status": "requires_payment_method", "client_secret": id + "_secret_fake",
		"created": f.now().Unix(), "metadata": metadataOf(form), "payment_method": pm, "payment_method_types": []string{"card"},
		"last_payment_error": nil, "next_action": nil, "latest_charge": nil, "livemode": false, "capture_method": captureMethod,
		"confirmation_method": "automatic"}
	f.pis[id] = pi
	f.order = append(f.order, id)
	if form.Get("confirm") != "true" {
		return reply{200, pi}
	}
	pi["latest_charge"] = f.id("ch")
	switch pm {
	case PMVisa:
		f.succeed(pi)
	case PM3DS:
		pi["status"] = "requires_action"
		pi["next_action"] = map[string]any{"type": "use_stripe_sdk", "use_stripe_sdk": map[string]any{"type": "three_d_secure_redirect"}}
		f.emit("payment_intent.requires_action", pi)
	case PMProcessing:
		pi["status"] = "processing"
		f.emit("payment_intent.processing", pi)
	default:
		decline := "generic_decline"
		if pm == PMInsufficient {
			decline = "insufficient_funds"
		}
		pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "decline_code": decline, "message": "Your card was declined."}
		f.emit("payment_intent.payment_failed", pi)
		e := errBody("card_error", "card_declined", "", "Your card was declined.")
		e["error"].(map[string]any)["decline_code"] = decline
		e["error"].(map[string]any)["payment_intent"] = clone(pi)
		return reply{402, e}
	}
	return reply{200, f.expand(pi, expandOf(form))}
}

// HoldWindow is how long the fake holds an authorized manual-capture
// PaymentIntent: its charge's capture_before is this after the
// PaymentIntent was created, as Stripe's seven days for a card.
const HoldWindow = 7 * 24 * time.Hour

// succeed makes a confirmed PaymentIntent's payment go through:
// succeeded, or, for a manual-capture one, authorized (requires_capture,
// all of it capturable) until its charge's capture_before; the caller
// holds mu.
func (f *Fake) succeed(pi map[string]any) {
	if pi["capture_method"] == "manual" {
		pi["status"], pi["amount_capturable"] = "requires_capture", pi["amount"]
		f.holds[pi["id"].(string)] = time.Unix(toInt(pi["created"]), 0).Add(HoldWindow).Unix()
		f.emit("payment_intent.amount_capturable_updated", pi)
		return
	}
	pi["status"], pi["amount_received"] = "succeeded", pi["amount"]
	f.emit("payment_intent.succeeded", pi)
}

// cancelPI cancels a PaymentIntent not yet final, as Stripe does: one that
// succeeded, is processing or is already canceled is refused with a 400
// carrying the PaymentIntent. A hold's cancel releases it all (its charge
// counts it refunded).
func (f *Fake) cancelPI(id string, form url.Values) reply {
	pi, ok := f.pis[id]
	if !ok {
		return notFound
	}
	switch pi["status"] {
	case "requires_payment_method", "requires_action", "requires_confirmation", "requires_capture":
		reason := form.Get("cancellation_reason")
		if reason == "" {
			reason = "requested_by_customer"
		}
		pi["status"], pi["next_action"], pi["cancellation_reason"] = "canceled", nil, reason
		pi["canceled_at"], pi["amount_capturable"] = f.now().Unix(), 0
		f.emit("payment_intent.canceled", pi)
		return reply{200, f.expand(pi, expandOf(form))}
	}
	return unexpectedState(pi, fmt.Sprintf("You cannot cancel this PaymentIntent because it has a status of %s.", pi["status"]))
}

// capturePI captures a hold (requires_capture) as Stripe does: all of
// amount_capturable, or amount_to_capture of it, once; the rest is
// released (its charge counts it refunded). charge.captured and
// payment_intent.succeeded follow. More than is capturable is 400
// amount_too_large; a PaymentIntent in any other status is 400
// payment_intent_unexpected_state, carrying it.
func (f *Fake) capturePI(id string, form url.Values) reply {
	pi, ok := f.pis[id]
	if !ok {
		return notFound
	}
	if pi["status"] != "requires_capture" {
		return unexpectedState(pi, fmt.Sprintf("This PaymentIntent could not be captured because it has a status of %s. "+
			"Only a PaymentIntent with one of the following statuses may be captured: requires_capture.", pi["status"]))
	}
	capturable := toInt(pi["amount_capturable"])
	amount := capturable
	if s := form.Get("amount_to_capture"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return reply{400, errBody("invalid_request_error", "parameter_invalid_integer", "amount_to_capture", "Invalid integer")}
		}
		amount = n
	}
	if amount > capturable {
		return reply{400, errBody("invalid_request_error", "amount_too_large", "amount_to_capture",
			"The amount to capture must be less than or equal to the amount capturable.")}
	}
	pi["status"], pi["amount_received"], pi["amount_capturable"] = "succeeded", amount, 0
	f.emit("charge.captured", f.charge(pi["latest_charge"].(string)))
	f.emit("payment_intent.succeeded", pi)
	return reply{200, f.expand(pi, expandOf(form))}
}

// unexpectedState is Stripe's refusal of an action pi's status does not
// allow: 400 payment_intent_unexpected_state, carrying the PaymentIntent.
func unexpectedState(pi map[string]any, msg string) reply {
	e := errBody("invalid_request_error", "payment_intent_unexpected_state", "", msg)
	e["error"].(map[string]any)["payment_intent"] = clone(pi)
	return reply{400, e}
}

func (f *Fake) listPIs(q url.Values) reply {
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	lt, err := strconv.ParseInt(q.Get("created[lt]"), 10, 64)
	if err != nil {
		lt = 1 << 62
	}
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > 100 {
		limit = 10
	}
	after := q.Get("starting_after")
	var data []any
	started := after == ""
	more := false
	for i := len(f.order) - 1; i >= 0; i-- { // newest first, as Stripe lists
		pi := f.pis[f.order[i]]
		if !started {
			started = f.order[i] == after
			continue
		}
		c := pi["created"].(int64)
		if c < gte || c >= lt {
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		data = append(data, pi)
	}
	return reply{200, map[string]any{"object": "list", "url": "/v1/payment_intents", "has_more": more, "data": orEmpty(data)}}
}

// searchPIs understands the one query payd sends: metadata['k']:'v'.
func (f *Fake) searchPIs(query string) reply {
	var k, v string
	if i := strings.Index(query, "']:'"); strings.HasPrefix(query, "metadata['") && i > 0 {
		k, v = query[len("metadata['"):i], strings.TrimSuffix(query[i+4:], "'")
	}
	var data []any
	for _, id := range f.order {
		if meta(f.pis[id])[k] == v && k != "" {
			data = append(data, f.pis[id])
		}
	}
	return reply{200, map[string]any{"object": "search_result", "url": "/v1/payment_intents/search", "has_more": false, "data": orEmpty(data)}}
}

func (f *Fake) createRefund(form url.Values) reply {
	pi, ok := f.pis[form.Get("payment_intent")]
	if !ok {
		return reply{400, errBody("invalid_request_error", "resource_missing", "payment_intent", "No such payment_intent")}
	}
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	if err != nil || amount <= 0 {
		return reply{400, errBody("invalid_request_error", "parameter_invalid_integer", "amount", "Invalid integer")}
	}
	if pi["status"] != "succeeded" || f.refunded(pi["id"])+amount > toInt(pi["amount_received"]) {
		return reply{400, errBody("invalid_request_error", "charge_already_refunded", "amount", "Refund exceeds the charge")}
	}
	status := "succeeded"
	if f.pendRefunds {
		status = "pending"
	}
	r := map[string]any{"id": f.id("re"), "object": "refund", "amount": amount, "currency": pi["currency"], "status": status,
		"payment_intent": pi["id"], "charge": pi["latest_charge"], "metadata": metadataOf(form), "created": f.now().Unix()}
	f.refunds[r["id"].(string)] = r
	f.emit("refund.created", r)
	if status == "succeeded" {
		f.emitChargeRefunded(pi)
	}
	return reply{200, r}
}

// refunded is how much of PaymentIntent pi its refunds (pending or
// succeeded, not failed) give back; the caller holds mu.
func (f *Fake) refunded(pi any) int64 {
	n := int64(0)
	for _, r := range f.refunds {
		if r["payment_intent"] == pi && r["status"] != "failed" {
			n += r["amount"].(int64)
		}
	}
	return n
}

// emitChargeRefunded emits charge.refunded for pi as it stands; the caller holds mu.
func (f *Fake) emitChargeRefunded(pi map[string]any) {
	refunded := f.refunded(pi["id"]) + f.released(pi)
	f.emit("charge.refunded", map[string]any{"id": pi["latest_charge"], "object": "charge", "amount": pi["amount"],
		"amount_refunded": refunded, "currency": pi["currency"], "payment_intent": pi["id"], "refunded": refunded == pi["amount"].(int64)})
}

// list answers a list of refunds or disputes as Stripe does: newest
// first, filtered by charge, payment_intent and created[gte]/created[lt],
// limit (10 by default, at most 100) and starting_after, each item expanded
// as expand[]=data.… asks; the caller holds mu.
func (f *Fake) list(path string, objs map[string]map[string]any, q url.Values) reply {
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	lt, err := strconv.ParseInt(q.Get("created[lt]"), 10, 64)
	if err != nil {
		lt = 1 << 62
	}
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > 100 {
		limit = 10
	}
	var expand []string
	for _, e := range expandOf(q) {
		if x, ok := strings.CutPrefix(e, "data."); ok {
			expand = append(expand, x)
		}
	}
	ids := make([]string, 0, len(objs))
	for id := range objs {
		ids = append(ids, id)
	}
	sortDesc(ids) // ids are sequential: newest first
	after := q.Get("starting_after")
	started := after == ""
	var data []any
	more := false
	for _, id := range ids {
		o := objs[id]
		if !started {
			started = id == after
			continue
		}
		if c := o["created"].(int64); c < gte || c >= lt {
			continue
		}
		if ch := q.Get("charge"); ch != "" && o["charge"] != ch {
			continue
		}
		if pi := q.Get("payment_intent"); pi != "" && o["payment_intent"] != pi {
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		data = append(data, f.expand(o, expand))
	}
	return reply{200, map[string]any{"object": "list", "url": path, "has_more": more, "data": orEmpty(data)}}
}

// expandOf is the fields a request asks to expand, written expand[]=f or
// expand[0]=f (stripe-go's form), as Stripe reads them.
func expandOf(q url.Values) []string {
	var out []string
	for k, v := range q {
		if strings.HasPrefix(k, "expand[") && strings.HasSuffix(k, "]") {
			out = append(out, v...)
		}
	}
	return out
}

// expand returns a copy of obj with each field named in fields (one
// level: payment_intent, charge, latest_charge) replaced by the object its
// id names, as Stripe's expand[] does; the caller holds mu.
func (f *Fake) expand(obj map[string]any, fields []string) map[string]any {
	if len(fields) == 0 {
		return obj
	}
	out := clone(obj)
	for _, field := range fields {
		id, _ := obj[field].(string)
		switch {
		case id == "":
		case field == "payment_intent" && f.pis[id] != nil:
			out[field] = clone(f.pis[id])
		case field == "charge" || field == "latest_charge":
			if ch := f.charge(id); ch != nil {
				out[field] = ch
			}
		}
	}
	return out
}

// charge is the Charge object of the PaymentIntent whose latest_charge is
// id, as it stands (refunded and disputed), or nil; the caller holds mu.
// Stripe does not copy the PaymentIntent's metadata onto it: neither does
// the fake. A hold's charge succeeded when it was authorized, uncaptured
// until its capture, and names its capture_before.
func (f *Fake) charge(id string) map[string]any {
	for _, piID := range f.order {
		pi := f.pis[piID]
		if pi["latest_charge"] != id {
			continue
		}
		before, held := f.holds[piID]
		status := "pending"
		switch pi["status"] {
		case "succeeded":
			status = "succeeded"
		case "requires_capture":
			if held {
				status = "succeeded"
			}
		case "canceled":
			status = "failed"
			if held {
				status = "succeeded" // authorized, then released
			}
		case "requires_payment_method":
			status = "failed"
		}
		disputed := false
		for _, d := range f.disputes {
			disputed = disputed || d["charge"] == id
		}
		refunded := f.refunded(piID) + f.released(pi)
		ch := map[string]any{"id": id, "object": "charge", "amount": pi["amount"], "amount_captured": pi["amount_received"],
			"amount_refunded": refunded, "currency": pi["currency"], "created": pi["created"], "status": status,
			"paid": status == "succeeded", "captured": pi["status"] == "succeeded", "refunded": refunded == pi["amount"].(int64),
			"disputed": disputed, "payment_intent": piID, "metadata": map[string]any{}, "livemode": false}
		if held {
			ch["payment_method_details"] = map[string]any{"type": "card", "card": map[string]any{"capture_before": before}}
		}
		return ch
	}
	return nil
}

// released is the part of hold pi that its capture or cancel gave up,
// which Stripe counts refunded on its charge (0 for any other
// PaymentIntent, and while it holds); the caller holds mu.
func (f *Fake) released(pi map[string]any) int64 {
	if _, held := f.holds[pi["id"].(string)]; !held || pi["status"] == "requires_capture" {
		return 0
	}
	return toInt(pi["amount"]) - toInt(pi["amount_received"])
}

func orEmpty(d []any) []any {
	if d == nil {
		return []any{}
	}
	return d
}

func sortDesc(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] > s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
