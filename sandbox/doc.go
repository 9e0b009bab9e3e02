// Package sandbox is a stand-in card processor that speaks payd's provider
// API over real HTTP. It keeps charges, refunds, disputes and owed
// webhooks in a database of its own (SQLite or MySQL), honours idempotency
// keys with unique indexes, fakes the failure modes that matter through
// magic payment methods, and delivers signed webhooks from a durable outbox
// with retries, and on demand duplicates, delays and reordering.
//
// It runs in-process on loopback (payd's default), as `payd sandbox`, or
// behind httptest in tests (see sandboxtest).
//
// # API
//
// JSON in and out; amounts are decimal strings at the currency's scale
// ("12.30"); times are RFC 3339 UTC with microseconds. Errors are
// {"error":{"code","message"}} with a stable code.
//
//	POST /v1/charges            Idempotency-Key; {order_id, amount, currency, payment_method, capture_method?}
//	                            → 200 {id, idempotency_key, order_id, amount, currency, payment_method,
//	                                   status, failure_code, refunded_amount, disputed_amount, created_at,
//	                                   capture_method, captured, amount_captured, capture_before (authorized only)}
//	POST /v1/captures           Idempotency-Key; {charge_id, amount?, currency?} → 200 the charge after
//	POST /v1/voids              Idempotency-Key; {charge_id} → 200 the charge after
//	GET  /v1/charges/{key}      → 200 the charge created under that idempotency key, or 404 charge_not_found
//	GET  /v1/charges/by-id/{id} → 200 the charge with that (sandbox) id, or 404 charge_not_found
//	GET  /v1/charges?from=&to=[&limit=&starting_after=]
//	                            → 200 {"data":[charge...],"has_more":bool}: a page of those created
//	                              in [from, to), oldest first, after the charge starting_after
//	                              names (400 when it names none); limit 1–1000, 100 by default
//	POST /v1/refunds            Idempotency-Key; {charge_id, amount, currency, reason}
//	                            → 200 {id, idempotency_key, charge_id, order_id, amount, currency, status, created_at}
//	GET  /v1/refunds?from=&to=[&limit=&starting_after=]
//	                            → 200 {"data":[refund...],"has_more":bool}: a page of those created
//	                              in [from, to), oldest first, paged as the charges are
//	GET  /v1/disputes?from=&to= → 200 {"data":[dispute...]} opened in [from, to), oldest first:
//	                              {id, charge_id, idempotency_key (the charge's), order_id, amount,
//	                               currency, status (open|won|lost), reason, created_at, closed_at (null while open),
//	                               evidence_due_by (seven days after created_at)}
//	GET  /v1/disputes/{id}      → 200 the dispute as the list gives it, or 404 dispute_not_found
//	POST /v1/disputes/{id}/close {"status":"won"|"lost"} → 200 the dispute
//	GET  /v1/settlements/{YYYY-MM-DD}.csv
//	                            → charge_id,idempotency_key,order_id,type,status,amount,currency,created_at,refund_id
//	                              one line per succeeded charge (type charge, no refund_id) and refund
//	                              (type refund, its id) created that UTC day; refund amounts are positive.
//
// A charge's refunded_amount is what refunds gave back, its disputed_amount
// what disputes withdrew and have not given back (open or lost). A list's
// from and to are RFC 3339 times, from before to, else 400 validation_failed.
//
// A key sent again with the same parameters returns the original charge or
// refund, without charging again; with other parameters it is 422
// idempotency_key_reused. A declined charge is a 200 with status failed.
// Every charge request's outcome is recorded under its key, so a replay
// says what the key did and never charges twice, even while the first
// request is still being carried out (Config.ChargeDelay holds each one
// before it is, to show a request processed late).
// Refunding more than is left is 422 refund_exceeds_charge; refunding a
// charge that did not succeed is 422 charge_not_refundable; an unknown
// charge is 404 charge_not_found. What is left to refund is the amount less
// refunds and lost disputes; a charge under an open dispute is not
// refundable at all (422 charge_disputed). Validation failures are 400 (the
// key stays unused).
//
// # Holds
//
// A charge with capture_method manual only holds its money when its
// payment method succeeds: status authorized, with capture_before
// (Config.AuthorizationTTL on). Every magic method works so (pm_async
// authorizes when it resolves; pm_dispute is disputed only once captured,
// for what was captured). Then exactly one of three ends the hold, each by
// a guarded UPDATE from authorized, so when they race one wins:
//   - a capture takes up to the held amount (all of it when amount is left
//     out) and releases the rest: status succeeded, amount_captured;
//   - a void gives it all up: status voided;
//   - past capture_before the hold lapses (LapseHolds): status voided,
//     failure_code authorization_expired; a capture is refused from that
//     instant, before the sweep.
//
// A capture or void key sent again with the same request answers the
// charge as it is now; with another request it is 422
// idempotency_key_reused. Refusals are 422: amount_too_large,
// charge_already_captured, charge_voided, authorization_expired,
// charge_not_capturable (not a manual charge, or not held),
// currency_mismatch. Refunds and disputes of a manual charge are bounded
// by what its capture took, and the settlement file lists it for that
// amount.
//
// Closing a dispute that is open moves it to won (its money goes back to
// the charge) or lost (the bank keeps it) and queues dispute.closed.
// Closing it again with the same status answers the dispute, with no
// second event; another status is 409 dispute_closed; a status other than
// won or lost is 400 validation_failed; an unknown dispute is 404
// dispute_not_found. Disputes are only ever opened by the sandbox itself
// (pm_dispute).
//
// # Magic payment methods
//
//	pm_ok                  succeeded
//	pm_declined            failed, card_declined
//	pm_insufficient_funds  failed, insufficient_funds
//	pm_async               pending; succeeded after Config.AsyncDelay
//	pm_async_fail          pending; failed (card_declined) after Config.AsyncDelay
//	pm_timeout             recorded as succeeded, but every POST reply is lost: the connection
//	                       is dropped unanswered (look it up with GET /v1/charges/{key})
//	pm_error               500 processing_error; recorded as failed (processing_error, nothing
//	                       charged, no webhook), so a replay of the key answers that failed charge
//	pm_dispute             succeeded; after Config.AsyncDelay the customer's bank disputes the
//	                       whole amount (reason fraudulent): an open dispute and dispute.created
//
// Anything else is 400 unknown_payment_method.
//
// # Webhooks
//
// Every final charge outcome (at once for synchronous methods, on
// resolution for asynchronous ones), every refund (whoever asked for it)
// and every dispute opened or closed queues an event:
//
//	{"id":"evt_<uuid>","type":"payment.succeeded|payment.failed|payment.authorized|payment.captured|payment.voided|
//	                          refund.succeeded|dispute.created|dispute.closed",
//	 "created_at":"<RFC 3339>","data":{...}}
//
// with data {charge_id, idempotency_key, order_id, amount, currency, status,
// failure_code, and amount_captured on payment.captured} for payments, {refund_id, charge_id, idempotency_key (the
// refund's), order_id, amount, currency} for refunds and {dispute_id,
// charge_id, idempotency_key (the charge's), order_id, amount, currency,
// status (open, or won or lost), reason} for disputes. A change and its
// event commit in one transaction, so a restart neither loses nor repeats
// one. Each is POSTed to
// Config.WebhookURL, signed per Standard Webhooks (webhook-id = the event
// id on every retry and duplicate, webhook-timestamp, webhook-signature),
// and retried with exponential backoff until the receiver answers 2xx.
package sandbox
