package idempotency

import (
	"bytes"
	"encoding/json"

	"github.com/payd/payd/domain"
)

// canonicalBody is the body as the fingerprint sees it: JSON re-encoded with
// sorted keys and no insignificant space, without the request_id field (it
// is the key, not the request). An empty body stays empty.
func canonicalBody(b []byte) ([]byte, string, error) {
	if out, key, ok := canonicalFlat(b); ok {
		return out, key, nil
	}
	return canonicalDecoded(b)
}

// canonicalDecoded is canonicalBody for any body: decoded, then encoded
// again by encoding/json.
func canonicalDecoded(b []byte) ([]byte, string, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, "", ErrMalformedBody
	}
	var key string
	if m, ok := v.(map[string]any); ok {
		if k, present := m["request_id"]; present {
			s, isString := k.(string)
			if !isString {
				return nil, "", &domain.ValidationError{Field: "request_id", Reason: "must be a string"}
			}
			key = s
			delete(m, "request_id")
		}
	}
	out, err := json.Marshal(v)
	return out, key, err
}
