package redisx

// LockKey and RecordKey name a key's entries, for the slot test.
var (
	LockKey   = lockKey
	RecordKey = recordKey
)
