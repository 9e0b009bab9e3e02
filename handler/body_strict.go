package handler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/idempotency"
)

const ctxBodyChecked = "payd.body.strict"

// requestBody is body for a JSON request that payd decodes: besides the
// size and content type, the JSON must say one thing only (strictJSON).
// It is what the idempotency middleware fingerprints and what decode
// reads, so a body refused here is refused before a key is taken. The
// provider's webhooks read body instead: their bytes are the provider's,
// signed, and checked after the signature (a 400 there would only make
// the provider deliver the same bytes again).
func requestBody(c echo.Context) ([]byte, error) {
	b, err := body(c)
	if err != nil || idempotency.IsMultipart(c) {
		return b, err
	}
	if checked, _ := c.Get(ctxBodyChecked).(bool); checked {
		return b, nil
	}
	if err := strictJSON(b); err != nil {
		return nil, err
	}
	c.Set(ctxBodyChecked, true)
	return b, nil
}

// freeText names the members whose strings are prose an operator types
// (a refund's reason, a resolution's note, an endpoint's description):
// there a tab or a line break is writing, not an attack. Every other
// string (names, emails, SKUs, codes) may hold no control character at
// all: a NUL or a line break in a name ends up in logs, CSV exports and
// the provider's metadata, where it splits or truncates a line.
var freeText = map[string]bool{"reason": true, "note": true, "description": true}

// strictJSON refuses a body that encoding/json would read leniently, each
// refusal a *domain.ValidationError naming the field as decode does
// ("items[0].name"):
//   - a member twice in one object, at any depth ("last wins" would let a
//     proxy or a log see another request than payd executes);
//   - a string that is not valid UTF-8, or escapes a lone surrogate
//     (encoding/json silently puts U+FFFD in its place);
//   - a control character (Unicode Cc: C0, DEL, C1) in a string, except a
//     tab or a line feed in the free-text members above; a member name may
//     hold none.
//
// Malformed JSON is left to the decoder, which answers it as before.
func strictJSON(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	w := &strictWalk{dec: dec, raw: b}
	if err := w.value(""); err != nil {
		if _, ok := err.(*domain.ValidationError); ok {
			return err
		}
	}
	return nil // syntax errors: decode and the fingerprint report them
}

type strictWalk struct {
	dec *json.Decoder
	raw []byte
}

// token reads the next token and the raw bytes it came from (with any
// separator and space before it, which hold no quote).
func (w *strictWalk) token() (json.Token, []byte, error) {
	from := w.dec.InputOffset()
	tok, err := w.dec.Token()
	return tok, w.raw[from:w.dec.InputOffset()], err
}

func (w *strictWalk) value(path string) error {
	tok, raw, err := w.token()
	if err != nil {
		return err
	}
	return w.after(tok, raw, path)
}

// after checks the value that starts with tok, at path.
func (w *strictWalk) after(tok json.Token, raw []byte, path string) error {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return w.object(path)
		}
		if t == '[' {
			return w.array(path)
		}
	case string:
		if reason := checkString(t, raw, freeText[lastMember(path)]); reason != "" {
			return &domain.ValidationError{Field: path, Reason: "is " + reason}
		}
	}
	return nil
}

func (w *strictWalk) object(path string) error {
	seen := map[string]bool{}
	for {
		tok, raw, err := w.token()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok {
			return nil // '}'
		}
		if reason := checkString(name, raw, false); reason != "" {
			if path == "" {
				return &domain.ValidationError{Reason: "a member name of the body is " + reason}
			}
			return &domain.ValidationError{Field: path, Reason: "has a member name that is " + reason}
		}
		field := joinPath(path, name)
		if seen[name] {
			return &domain.ValidationError{Field: field, Reason: "is given more than once"}
		}
		seen[name] = true
		if err := w.value(field); err != nil {
			return err
		}
	}
}

func (w *strictWalk) array(path string) error {
	for i := 0; ; i++ {
		tok, raw, err := w.token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			return nil
		}
		if err := w.after(tok, raw, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
}

// checkString checks the decoded string s against the raw JSON string it
// came from (raw may begin with separators and space) and says what is
// wrong with it, or "" when nothing is.
func checkString(s string, raw []byte, text bool) string {
	if i := bytes.IndexByte(raw, '"'); i >= 0 {
		raw = raw[i:]
	}
	if !validJSONString(raw) {
		return "not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(text && (r == '\t' || r == '\n')) {
			return "not allowed to contain the control character " + strconv.QuoteRune(r)
		}
	}
	return ""
}

// validJSONString says whether the quoted JSON string raw (as it stands
// in the body, escapes and all) is valid UTF-8 whose \u escapes pair
// their surrogates: everything encoding/json would otherwise replace with
// U+FFFD without a word.
func validJSONString(raw []byte) bool {
	for i := 1; i < len(raw)-1; {
		if raw[i] != '\\' {
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
			continue
		}
		if raw[i+1] != 'u' {
			i += 2
			continue
		}
		hi, ok := hex4(raw, i+2)
		if !ok {
			return true // malformed: the decoder says so
		}
		i += 6
		switch {
		case hi >= 0xDC00 && hi <= 0xDFFF:
			return false // a low surrogate alone
		case hi >= 0xD800 && hi <= 0xDBFF:
			lo, ok := hex4(raw, i+2)
			if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' || !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false // a high surrogate without its low half
			}
			i += 6
		}
	}
	return true
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[at:at+4]), 16, 16)
	return rune(n), err == nil
}

// lastMember is the member name path ends with ("reason" of
// "refunds[0].reason"); "" when it ends with an index.
func lastMember(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		path = path[i+1:]
	}
	if len(path) > 0 && path[len(path)-1] == ']' {
		return ""
	}
	return path
}
