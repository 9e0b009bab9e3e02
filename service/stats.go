package service

import (
	"context"
	"time"

	"github.com/payd/payd/domain"
)

// StatsReader reads the operators' overview of a window.
type StatsReader interface {
	// Stats counts the attempts and ledger entries created in w per
	// bucket, adds up the money, and reads what is open now.
	Stats(ctx context.Context, w domain.StatsWindow) (domain.Stats, error)
}

// Stats answers the operators' overview: from, to and bucket as asked
// (zero and empty when not), with domain.NewStatsWindow's defaults and
// rules; an invalid window is a validation error.
func (s *Admin) Stats(ctx context.Context, from, to time.Time, bucket string) (domain.Stats, error) {
	now := s.Now()
	w, err := domain.NewStatsWindow(from, to, bucket, now)
	if err != nil {
		return domain.Stats{}, err
	}
	st, err := s.StatsReader.Stats(ctx, w)
	st.ReadAt = now
	return st, err
}
