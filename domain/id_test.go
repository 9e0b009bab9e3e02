package domain

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"0197a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b", true},
		{"0197A3B2-7C1D-7E4F-8A9B-0C1D2E3F4A5B", true}, // a UUID; no row has it, so it is an ordinary 404
		{"", false},
		{strings.Repeat("a", 36), false},
		{strings.Repeat("a", 37), false},
		{strings.Repeat("0", 600), false},
		{"0197a3b27c1d7e4f8a9b0c1d2e3f4a5b", false},       // 32 hex digits, no dashes
		{"{0197a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b}", false}, // braces
		{"urn:uuid:0197a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b", false},
		{"0197a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5\xff", false},
		{"0197a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5g", false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}
