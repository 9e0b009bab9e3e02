package service

// Keyed names the idempotent request a row is created under: its key and
// its fingerprint (the idempotency package's Call.Fingerprint). The row
// keeps both, so once the record is gone (expired or purged) a repeated
// request can still be told from another request under the same key. The
// zero value is a request without a key.
type Keyed struct{ Key, Fingerprint string }
