package handler

import "testing"

// TestOperatorsMatch: each token names its operator, the shared token is
// admin, and anything else — empty, a prefix, another case, a token with
// a trailing space — matches nobody.
func TestOperatorsMatch(t *testing.T) {
	ops := newOperators("adm_shared_0123456789abcdef", []Operator{{"alice", "tok-alice-0123456789abcdef"}, {"bob", "tok-bob-0123456789abcdef"}, {"carol", ""}})
	for tok, want := range map[string]string{
		"adm_shared_0123456789abcdef": "admin",
		"tok-alice-0123456789abcdef":  "alice",
		"tok-bob-0123456789abcdef":    "bob",
		"":                            "",
		"tok-alice":                   "",
		"TOK-ALICE-0123456789ABCDEF":  "",
		"tok-bob-0123456789abcdef ":   "",
	} {
		if got := ops.match(tok); got != want {
			t.Errorf("match(%q) = %q, want %q", tok, got, want)
		}
	}
	if got := newOperators("", nil).match(""); got != "" {
		t.Errorf("no tokens: match(\"\") = %q, want nobody", got)
	}
}
