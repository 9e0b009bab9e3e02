package handler

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/payd/payd/domain"
)

// TestDisputeLostProblem: a refund refused after a lost dispute is the
// same charge_disputed refusal, worded as a lost dispute (the money is
// gone), never as one under an open dispute; an open one keeps its words.
func TestDisputeLostProblem(t *testing.T) {
	lost, _ := toProblem(fmt.Errorf("%w: charge ch_1: %w", domain.ErrChargeDisputeLost, domain.ErrChargeDisputed))
	if lost.Status != http.StatusConflict || lost.Code != "charge_disputed" || !strings.Contains(lost.Detail, "lost") || strings.Contains(lost.Detail, "open dispute") {
		t.Errorf("toProblem(lost dispute) = %d %s %q, want 409 charge_disputed saying it was lost", lost.Status, lost.Code, lost.Detail)
	}
	open, _ := toProblem(fmt.Errorf("%w: charge ch_1", domain.ErrChargeDisputed))
	if open.Code != "charge_disputed" || !strings.Contains(open.Detail, "open dispute") {
		t.Errorf("toProblem(open dispute) = %s %q, want charge_disputed under an open dispute", open.Code, open.Detail)
	}
}
