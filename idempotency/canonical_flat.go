package idempotency

import (
	"slices"
	"strings"
)

// canonicalFlat is canonicalBody's fast path for the bodies payd's hot
// routes take: one JSON object of plain strings, numbers, booleans and
// nulls. It writes the bytes canonicalDecoded would (fingerprints stored by
// either must match), without decoding into maps: keys sorted, no space,
// request_id left out. Whatever it is not sure to render identically (a
// nested value, an escape, a character encoding/json would escape, a
// repeated key, anything malformed) it declines with ok false, and
// canonicalDecoded decides.
func canonicalFlat(b []byte) (out []byte, key string, ok bool) {
	type member struct{ name, value string }
	var members []member
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, "", false
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if len(members) > 0 {
			if b[i] != ',' {
				return nil, "", false
			}
			i = skipSpace(b, i+1)
		}
		name, j, ok := plainString(b, i)
		if !ok {
			return nil, "", false
		}
		j = skipSpace(b, j)
		if j == len(b) || b[j] != ':' {
			return nil, "", false
		}
		j = skipSpace(b, j+1)
		value, end, ok := plainValue(b, j)
		if !ok {
			return nil, "", false
		}
		members = append(members, member{string(name), string(value)})
		i = skipSpace(b, end)
	}
	if i == len(b) || skipSpace(b, i+1) != len(b) {
		return nil, "", false
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	out = append(make([]byte, 0, len(b)), '{')
	for n, m := range members {
		if n > 0 && m.name == members[n-1].name {
			return nil, "", false // a repeated key: encoding/json keeps the last
		}
		if m.name == "request_id" {
			if m.value[0] != '"' {
				return nil, "", false // not a string: canonicalDecoded says so
			}
			key = m.value[1 : len(m.value)-1]
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), m.name...), '"', ':'), m.value...)
	}
	return append(out, '}'), key, true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] made only of printable ASCII
// that encoding/json writes back unchanged (no escapes, no <, > or &); it
// returns its contents and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i == len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\' || c == '<' || c == '>' || c == '&':
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainValue reads a plain string (quotes included), a number, true, false
// or null at b[i], and returns its text and the index after it.
func plainValue(b []byte, i int) ([]byte, int, bool) {
	if i == len(b) {
		return nil, 0, false
	}
	if b[i] == '"' {
		_, end, ok := plainString(b, i)
		if !ok {
			return nil, 0, false
		}
		return b[i:end], end, true
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(string(b[i:]), lit) {
			return b[i : i+len(lit)], i + len(lit), true
		}
	}
	end, ok := number(b, i)
	if !ok {
		return nil, 0, false
	}
	return b[i:end], end, true
}

// number reads a JSON number at b[i] (RFC 8259 grammar) and returns the
// index after it. encoding/json keeps a number's text as it is
// (json.Number), so a valid one is written back unchanged.
func number(b []byte, i int) (int, bool) {
	digits := func(j int) int {
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}
