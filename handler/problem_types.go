package handler

import (
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
)

// problemType describes one problem code: what a problem's type URI
// (/problems/{code}) resolves to. Every code payd answers with has one;
// its status and title are written here only, and every problem of the
// code takes them from here (problem).
type problemType struct {
	Status int
	Title  string
	About  string // what happened and what the caller can do
}

// problemTypes is the catalogue of every problem code payd answers with:
// the one table of their statuses and titles.
var problemTypes = map[string]problemType{
	"validation_failed":             {400, "Invalid request", "The request body or a query parameter is invalid: not JSON, an unknown field, a value of the wrong type, or a value outside its rules. `errors` lists every invalid field as {param, detail}; correct them all and send again. Nothing was done, and an idempotency key stays free."},
	"idempotency_key_missing":       {400, "Idempotency key missing", "This route needs an Idempotency-Key header (or a request_id field in the body). Send a fresh UUID v4 per logical request and reuse it for retries of that request."},
	"idempotency_key_invalid":       {400, "Idempotency key invalid", "An idempotency key is 1 to 255 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-', and the header and a request_id field in the body must agree."},
	"idempotency_key_in_use":        {409, "Request still in progress", "The first request with this key is still running. Retry with the same key after the time in Retry-After: you then get its answer."},
	"stored_response_unreadable":    {410, "Stored response unreadable", "The answer stored for this idempotency key was sealed with a secret key this server no longer has (PAYD_SECRET_KEY changed), so it cannot be replayed, and the request was not executed again. Use a new key; a token it carried no longer works either."},
	"idempotency_key_reused":        {422, "Idempotency key reused", "This key was already used for a different request (another body, method or path). Nothing was done. Use a new key for a new request."},
	"order_not_found":               {404, "Order not found", "There is no such order, or it belongs to another customer."},
	"request_not_found":             {404, "Request not found", "No request with this idempotency key is known to the caller (never sent, or its record has expired)."},
	"order_already_paid":            {409, "Order already paid", "The order was already paid by another request; nothing was charged again. Fetch the order to see its payment."},
	"order_payment_in_progress":     {409, "Payment in progress", "Another payment of this order is running. Wait for its outcome (GET the order, or its event stream) instead of paying again."},
	"order_expired":                 {409, "Order expired", "The order expired before it was paid and can no longer be paid. Create a new order."},
	"order_not_payable":             {409, "Order not payable", "The order was cancelled or has expired and can no longer be paid."},
	"payment_method_invalid":        {400, "Payment method invalid", "The payment provider does not know this payment method; nothing was charged. Use another one."},
	"order_not_cancelable":          {409, "Order cannot be cancelled", "Only a pending order can be cancelled; this one is being paid, paid or closed."},
	"capture_too_large":             {409, "Capture too large", "The capture asks for more than the order holds. Nothing was captured; capture at most the order's amount."},
	"order_not_capturable":          {409, "Order not capturable", "The order holds no money to capture: it is not authorized (its capture_method is automatic, or its pay has not succeeded), it was captured already, or another capture or a cancel is ending its hold right now. Read the order to see which."},
	"authorization_expired":         {409, "Authorization expired", "The order's hold ran past capture_before and can no longer be captured; payd voids it and the order expires. Create a new order to charge the buyer."},
	"order_not_paid":                {409, "Order not paid", "Only a paid order ships. This one is not paid yet, its money is only held (capture it first), or it was refunded in full. Nothing was shipped."},
	"card_declined":                 {402, "Payment declined", "The provider declined the payment; `decline_code` says why (card_declined, insufficient_funds, ...). Nothing was charged. Try another payment method; a new key is not needed."},
	"payment_outcome_unknown":       {503, "Payment outcome unknown", "The provider did not answer in time. payd resolves the outcome by itself; retry with the same key after the time in Retry-After, or watch the order, and never pay or refund with a new key meanwhile."},
	"payment_amount_mismatch":       {502, "Payment amount mismatch", "The provider reported a charge for another amount or currency than the order's. The order was not paid; an operator refunds or applies the charge. Do not pay again."},
	"payment_not_completed":         {502, "Payment not completed", "The payment did not complete and the order is not paid; anything charged for it is refunded. You may pay again."},
	"email_taken":                   {409, "Email already registered", "An account with this email address already exists."},
	"unauthorized":                  {401, "Unauthorized", "The route needs a bearer token, and none or an unknown one was sent. Customer routes take the token from registration; operator routes the admin token; the catalogue's writes a merchant key (sk_...)."},
	"forbidden":                     {403, "Forbidden", "The token is valid but not for this route: a customer token or a merchant key on an operator route, an admin token or a merchant key on a customer route, or a customer or admin token on a merchant route."},
	"order_not_refundable":          {409, "Order not refundable", "Only a paid order can be refunded."},
	"refund_too_large":              {409, "Refund too large", "The refund exceeds what remains refundable on this order; nothing was refunded."},
	"refund_refused":                {502, "Refund refused by the provider", "The payment provider refused the refund; nothing was refunded."},
	"reconciliation_not_found":      {404, "Reconciliation not found", "There is no such reconciliation run."},
	"discrepancy_not_found":         {404, "Discrepancy not found", "There is no such discrepancy in this run."},
	"discrepancy_already_resolved":  {409, "Discrepancy already resolved", "This discrepancy was already resolved with another action (or is being resolved with it right now). `actions` is empty: no other action may resolve it."},
	"resolution_not_applicable":     {409, "Resolution not applicable", "This action does not fit this discrepancy; nothing was done. `actions` (and the detail) name the actions that fit it, from the same table that refused this one; an empty list means no other action fits either."},
	"charge_belongs_to_other_order": {409, "Charge belongs to another order", "Asked before any money moved, the provider says the charge pays another order than the one this action is about (or than the order the settlement line or event named). Nothing was refunded or applied, and the discrepancy stays open. The detail names that order: refund it there, through its own refund, if that is what is meant."},
	"charge_disputed":               {409, "Charge disputed", "The charge is under an open dispute: the bank has taken the money back from payd's account provisionally, so a refund would give it to the customer twice. Nothing was refunded. Answer or accept the dispute at the provider; once it is closed the charge can be refunded if anything is left. After a lost dispute the same code says so in its detail: the bank gave the disputed money to the customer, and there is nothing of it to refund."},
	"product_not_found":             {404, "Product not found", "There is no such product in the catalogue, or it is inactive (buyers see active products only)."},
	"sku_taken":                     {409, "SKU taken", "A product with this SKU already exists, created under another idempotency key. Nothing was stored. Change it with PATCH /v1/products/{sku}, or choose another SKU."},
	"out_of_stock":                  {409, "Out of stock", "A line of the order asks for more units of a product than its stock has left. The problem's sku names it. Nothing was created and no stock was taken; lower the quantity or drop the line."},
	"insufficient_stock":            {409, "Insufficient stock", "The adjustment would take the product's stock below 0. Nothing was changed; GET the product to see what is left."},
	"stock_unlimited":               {409, "Stock unlimited", "The product's stock is unlimited (null): it is not counted, so there is nothing to adjust. Nothing was changed."},
	"endpoint_not_found":            {404, "Endpoint not found", "There is no such merchant endpoint (it may have been deleted)."},
	"event_not_found":               {404, "Event not found", "There is no such order event: its id is the webhook-id its deliveries carried."},
	"endpoint_url_refused":          {422, "Endpoint URL refused", "The URL names an address on payd's own side of the network (loopback, private, link-local, unspecified or multicast), which payd does not send to in production unless PAYD_NOTIFY_ALLOW_PRIVATE lists it. Nothing was stored. Use the shop's public address."},
	"invalid_signature":             {401, "Invalid signature", "The webhook's signature is missing, forged or too old; it was not applied."},
	"payload_too_large":             {413, "Payload too large", "The request body exceeds 1 MiB (an upload 64 MiB)."},
	"unsupported_media_type":        {415, "Unsupported media type", "Send the request body as application/json (a settlement file as multipart/form-data)."},
	"not_found":                     {404, "Not found", "No such route, or no such problem type."},
	"method_not_allowed":            {405, "Method not allowed", "The route exists but does not accept this method."},
	"rate_limited":                  {429, "Too many requests", "This caller (a customer token, an operator token, a merchant key, or a client address on a route without a token or after failed authentications) sent more requests than payd allows (PAYD_RATE_LIMIT per second, bursts up to PAYD_RATE_LIMIT_BURST; provider webhooks have their own, PAYD_WEBHOOK_RATE_LIMIT per source address). The request was refused before payd read it: nothing was done, and an idempotency key stays free. Retry after the seconds in Retry-After; the RateLimit-Policy and RateLimit headers give the quota and what is left of it."},
	"too_many_streams":              {429, "Too many event streams", "This customer already has as many event streams open as payd allows. Close one, or retry after the time in Retry-After."},
	"http_error":                    {400, "HTTP error", "The HTTP request was refused before payd read it; the status and detail say why."},
	"not_ready":                     {503, "Not ready", "payd cannot serve yet, or no longer: its database is unreachable, its migrations are not applied, or it is shutting down (the detail says which)."},
	"service_unavailable":           {503, "Service unavailable", "payd cannot reach its database right now (or, for a provider's webhook, the payment provider it must ask before applying the event). Nothing was decided — or, when payd lost its database just as it was storing a request's answer, nothing was answered: the answer is sent only once stored, and the retry finds what the request did. Retry after the time in Retry-After; a retry with the same idempotency key, or a redelivery of the event, is safe."},
	"internal_error":                {500, "Internal error", "Something went wrong inside payd. It was logged with the request_id of this problem: quote it when you report it."},
}

var problemPage = template.Must(template.New("problem").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} ({{.Code}}) · payd</title></head>
<body><h1>{{.Title}}</h1>
<p>Problem code <code>{{.Code}}</code>, HTTP status {{.Status}}.</p>
<p>{{.About}}</p>
<p>Every payd error is an RFC 9457 problem (<code>application/problem+json</code>) with
<code>type</code>, <code>title</code>, <code>status</code>, <code>detail</code>, <code>code</code>,
<code>instance</code> (the request's path) and <code>request_id</code> (its X-Request-ID).</p>
</body></html>
`))

// problemDoc serves GET /problems/{code}: the page a problem's type URI
// names, so that it resolves. It answers HTML, or JSON to a client that
// asks for it (Accept: application/json).
func problemDoc(c echo.Context) error {
	code := c.Param("code")
	pt, ok := problemTypes[code]
	if !ok {
		return errRouteNotFound
	}
	doc := struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
		Title  string `json:"title"`
		About  string `json:"description"`
	}{code, pt.Status, pt.Title, strings.ReplaceAll(pt.About, "`", "")}
	if strings.Contains(c.Request().Header.Get(echo.HeaderAccept), echo.MIMEApplicationJSON) {
		return writeJSON(c, http.StatusOK, doc)
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusOK)
	return problemPage.Execute(c.Response(), doc)
}

// problemCodes is every code of the catalogue, sorted.
func problemCodes() []string {
	codes := make([]string, 0, len(problemTypes))
	for code := range problemTypes {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	return codes
}
