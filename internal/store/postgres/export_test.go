package postgres

import (
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
)

// Renewal is one lane's CompleteRenew, for CompleteRenewBatch.
type Renewal struct {
	Owner           string
	Res             core.LaneResult
	Now, ClaimUntil time.Time
	PerLane         int
}

// CompleteRenewBatch completes rs as one gathered batch and returns each
// one's answer. With alone, a batch that fails is retried one request at a
// time, as the worker does; without, the batch statements' error is
// returned as is (batchErr) and no request is answered on its own.
func CompleteRenewBatch(s *Store, rs []Renewal, alone bool) (next [][]*core.Message, errs []error, batchErr error) {
	qs := make([]*completeReq, len(rs))
	for i, r := range rs {
		qs[i] = &completeReq{owner: r.Owner, res: r.Res, now: r.Now, claimUntil: r.ClaimUntil, perLane: r.PerLane, done: make(chan completeAns, 1)}
	}
	if alone {
		s.completeBatch(qs)
	} else if batchErr = s.completeRenewMany(qs); batchErr != nil {
		return nil, nil, batchErr
	}
	next, errs = make([][]*core.Message, len(rs)), make([]error, len(rs))
	for i, q := range qs {
		a := <-q.done
		next[i], errs[i] = a.next, a.err
	}
	return next, errs, nil
}
