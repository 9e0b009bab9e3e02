package handler

import (
	"errors"
	"testing"

	"github.com/payd/payd/domain"
)

func TestStrictJSONFields(t *testing.T) {
	tests := []struct {
		name, body, field string // field "-": accepted
	}{
		{"plain", `{"currency":"USD","items":[{"name":"A \u00e9 \ud83d\ude00"}]}`, "-"},
		{"not JSON is the decoder's", `{"currency":`, "-"},
		{"empty", ``, "-"},
		{"same name in two objects", `{"a":{"x":1},"b":{"x":2}}`, "-"},
		{"names differing in case", `{"Currency":"EUR","currency":"USD"}`, "-"},
		{"top-level twice", `{"currency":"EUR","currency":"USD"}`, "currency"},
		{"deep twice", `{"a":{"b":[{"c":1},{"c":1,"c":2}]}}`, "a.b[1].c"},
		{"twice with a null", `{"amount":null,"amount":"1.00"}`, "amount"},
		{"invalid byte", "{\"name\":\"A\xc3\"}", "name"},
		{"invalid byte in an array", "{\"tags\":[\"ok\",\"\xff\"]}", "tags[1]"},
		{"lone low surrogate", `{"name":"\udc00"}`, "name"},
		{"high surrogate, no low", `{"name":"\ud800x"}`, "name"},
		{"high surrogate, then another high", `{"name":"\ud800\ud800"}`, "name"},
		{"escaped U+FFFD is a character", `{"name":"\ufffd"}`, "-"},
		{"escaped backslash then u", `{"name":"\\ud800"}`, "-"},
		{"NUL", `{"name":"a\u0000"}`, "name"},
		{"tab in a name", `{"name":"a\tb"}`, "name"},
		{"DEL", "{\"name\":\"a\x7f\"}", "name"},
		{"tab and line feed in a reason", `{"reason":"a\n\tb"}`, "-"},
		{"carriage return in a reason", `{"reason":"a\r\nb"}`, "reason"},
		{"NUL in a note", `{"note":"a\u0000"}`, "note"},
		{"control in a member name", `{"items":[{"na\u0000me":"x"}]}`, "items[0]"},
		{"invalid byte in a member name", "{\"n\xffame\":\"x\"}", ""},
	}
	for _, tt := range tests {
		err := strictJSON([]byte(tt.body))
		if tt.field == "-" {
			if err != nil {
				t.Errorf("%s: strictJSON(%q) = %v, want nil", tt.name, tt.body, err)
			}
			continue
		}
		var v *domain.ValidationError
		if !errors.As(err, &v) || v.Field != tt.field {
			t.Errorf("%s: strictJSON(%q) = %v, want a validation error naming %q", tt.name, tt.body, err, tt.field)
		}
	}
}
