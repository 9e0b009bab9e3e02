package domain

import (
	"fmt"
	"time"
)

// RunCheckpoint is a reconciliation run in progress as its checkpoint
// keeps it (ADR 0068): the run it is, and the pages of charges it has
// decided, in order. A run that payd did not finish (it died, the
// provider failed a page) resumes from its last page when it is asked
// again: the same request retried under its idempotency key, or the
// schedule's window taken over.
type RunCheckpoint struct {
	Key   string // the resume key: a hash of what identifies the run
	RunID string
	// Owner is the process running it now; a run taken over by another
	// writes no more pages (ErrRunTakenOver).
	Owner     string
	CreatedAt time.Time // the run's
	// Recorded says the run is recorded: asked again, it answers the run
	// RunID as recorded, and walks nothing.
	Recorded bool
	// Saved is when the checkpoint was last written before it was taken.
	Saved time.Time
	Pages []CheckpointPage
}

// CheckpointPage is what a run learned from one page of charges.
type CheckpointPage struct {
	N int // from 1
	// After is where the next page starts: the provider's cursor, or in a
	// settlement file the number of its succeeded charges decided so far.
	After string
	// Last marks the walk's final page: a run resumed after it walks no
	// more charges.
	Last    bool
	Matched int
	Keys    []string // the idempotency keys of the page's successful charges
	// Recheck are the page's charges that disagreed with payd's books.
	// A resumed run decides them again rather than trusting what they
	// said then: a webhook may have settled one since.
	Recheck []Charge
}

// Done reports whether the checkpoint's walk of charges is complete.
func (c RunCheckpoint) Done() bool {
	return len(c.Pages) > 0 && c.Pages[len(c.Pages)-1].Last
}

// After is where the walk continues: "" from the start.
func (c RunCheckpoint) After() string {
	if len(c.Pages) == 0 {
		return ""
	}
	return c.Pages[len(c.Pages)-1].After
}

// Check reports a checkpoint whose pages do not follow each other (1, 2,
// 3, ...) or that goes on after its last page: one to start afresh from,
// not to resume.
func (c RunCheckpoint) Check() error {
	for i, p := range c.Pages {
		if p.N != i+1 {
			return fmt.Errorf("checkpoint %s: page %d where page %d belongs", c.Key, p.N, i+1)
		}
		if p.Last && i != len(c.Pages)-1 {
			return fmt.Errorf("checkpoint %s: pages after the last", c.Key)
		}
	}
	return nil
}

// ErrRunTakenOver means another process took a reconciliation run over
// while this one ran it (its request retried under the same key, or the
// schedule's window taken over): this one stops and records nothing, and
// the run's answer is the other's. It is a kind of ErrKeyInUse: a retry
// with the key gets that answer once the run is done.
var ErrRunTakenOver = fmt.Errorf("%w: reconciliation run taken over by another process", ErrKeyInUse)
