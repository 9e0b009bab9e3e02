package handler

import "github.com/payd/payd/domain"

// The order's books as operators read them (GET /v1/admin/orders/{id}):
// the money summary on the order, the ledger's entries and the disputes.

// booksJSON is domain.Books, each sum in the order's currency's full scale.
type booksJSON struct {
	// Authorized is what holds keep on the buyer's card: not the
	// merchant's money until captured (ADR 0060).
	Authorized string `json:"authorized"`
	Charged    string `json:"charged"`
	Refunded   string `json:"refunded"`
	Disputed   string `json:"disputed"`
	Lost       string `json:"lost"`
	Net        string `json:"net"`
}

func toBooksJSON(b domain.Books, cur domain.Currency) booksJSON {
	return booksJSON{Authorized: domain.FormatAmount(b.Authorized, cur), Charged: domain.FormatAmount(b.Charged, cur), Refunded: domain.FormatAmount(b.Refunded, cur),
		Disputed: domain.FormatAmount(b.Disputed, cur), Lost: domain.FormatAmount(b.Lost, cur), Net: domain.FormatAmount(b.Net, cur)}
}

// adminOrderJSON is the order as an operator sees it: what a customer
// sees, and what its ledger adds up to.
type adminOrderJSON struct {
	orderJSON
	Money booksJSON `json:"money"`
}

// ledgerEntryJSON is one movement of the order's money.
type ledgerEntryJSON struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Reference string  `json:"reference"`
	ChargeID  string  `json:"charge_id"`
	Amount    string  `json:"amount"`
	Currency  string  `json:"currency"`
	Source    string  `json:"source"`
	Actor     *string `json:"actor"` // the operator, for source operator
	Note      string  `json:"note"`
	CreatedAt string  `json:"created_at"`
}

func toLedgerEntryJSON(e domain.LedgerEntry) ledgerEntryJSON {
	return ledgerEntryJSON{ID: e.ID, Kind: string(e.Kind), Reference: e.Reference, ChargeID: e.ChargeID,
		Amount: domain.FormatAmount(e.Amount, e.Currency), Currency: string(e.Currency), Source: string(e.Source),
		Actor: strPtr(e.Actor), Note: e.Note, CreatedAt: stamp(e.CreatedAt)}
}

// ledgerSummary is a ledger entry's line on the timeline, e.g.
// "refund 3.00 USD (operator alice)".
func ledgerSummary(j ledgerEntryJSON) string {
	by := j.Source
	if j.Actor != nil {
		by += " " + *j.Actor
	}
	return j.Kind + " " + j.Amount + " " + j.Currency + " (" + by + ")"
}

// disputeJSON is a dispute under the provider's ID, the one operators
// search by and answer at the provider.
type disputeJSON struct {
	ID       string  `json:"id"`
	ChargeID string  `json:"charge_id"`
	Status   string  `json:"status"`
	Amount   string  `json:"amount"`
	Currency string  `json:"currency"`
	Reason   string  `json:"reason"`
	OpenedAt string  `json:"opened_at"`
	ClosedAt *string `json:"closed_at"`
	// EvidenceDueBy is when the provider wants the merchant's evidence;
	// null while it has named no date.
	EvidenceDueBy *string `json:"evidence_due_by"`
	// ProviderURL is where an operator reads and answers the dispute at
	// the provider (Stripe's dashboard, the sandbox's record); null when
	// payd knows no such place.
	ProviderURL *string `json:"provider_url"`
}

func toDisputeJSON(d domain.Dispute, links ProviderLinks) disputeJSON {
	return disputeJSON{ID: d.ProviderDisputeID, ChargeID: d.ChargeID, Status: string(d.Status),
		Amount: domain.FormatAmount(d.Amount, d.Currency), Currency: string(d.Currency), Reason: d.Reason,
		OpenedAt: stamp(d.OpenedAt), ClosedAt: stampPtr(d.ClosedAt), EvidenceDueBy: stampPtr(d.EvidenceDueBy),
		ProviderURL: disputeURL(links, d.ProviderDisputeID)}
}

// ProviderLinks names where an operator reads the provider's own record
// of a dispute: Stripe's dashboard, or the sandbox's API. The provider
// adapters implement it; "" is no such place.
type ProviderLinks interface {
	DisputeURL(id string) string
}

// disputeURL is links' place for dispute id, nil when there is none.
func disputeURL(links ProviderLinks, id string) *string {
	if links == nil {
		return nil
	}
	if u := links.DisputeURL(id); u != "" {
		return &u
	}
	return nil
}

func disputeReason(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
