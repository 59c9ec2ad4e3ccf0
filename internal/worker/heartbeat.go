package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// heartbeat keeps one assignment alive while the provider works.
type heartbeat struct {
	cancel context.CancelFunc
	done   chan struct{}

	fenced atomic.Pointer[ledger.FencedError]
	beats  atomic.Int64 // successful renewals
}

// startHeartbeat renews the lease and the message's visibility until callCtx
// ends or a renewal is fenced (doc.go, step 3; cancelCall then cancels the
// call unless the task is stillOurs).
func (h *Handler) startHeartbeat(callCtx context.Context, cancelCall context.CancelCauseFunc, rec events.SQSMessage, t *ledger.Task, log *slog.Logger) *heartbeat {
	ctx, cancel := context.WithCancel(callCtx)
	hb := &heartbeat{cancel: cancel, done: make(chan struct{})}
	lease := h.lease()
	go func() {
		defer close(hb.done)
		tick := time.NewTicker(max(lease/3, 10*time.Millisecond)) // a tiny Lease must not spin it
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			began := time.Now()
			_, err := h.Ledger.Renew(ctx, t.TaskID, t.AssignmentVersion, lease, ledger.WithAgeDeadline(t.DeadlineMs))
			var fe *ledger.FencedError
			switch {
			case errors.As(err, &fe) && stillOurs(fe.Current, t.AssignmentVersion):
				log.WarnContext(ctx, "heartbeat refused: the lease lapsed to unknown at this assignment; renewals stop, the call goes on so its result can settle the task",
					"why", fe.Why, "current_version", currentVersion(fe))
				return
			case errors.As(err, &fe):
				hb.fenced.Store(fe)
				cancelCall(fmt.Errorf("%w (%s)", ErrFenced, fe.Why))
				log.WarnContext(ctx, "heartbeat fenced; provider call cancelled", "why", fe.Why, "current_version", currentVersion(fe))
				return
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				// Tried again at the next beat; a lease that runs out lapses to
				// unknown at this version (a marked call's; a deduplicating
				// step's is re-queued), from which Complete still saves.
				log.WarnContext(ctx, "heartbeat renewal failed", "error", err.Error())
				continue
			}
			hb.beats.Add(1)
			renewed := time.Now()
			h.setVisibility(ctx, rec, 2*lease, log)
			log.DebugContext(ctx, "heartbeat", "renew_ms", renewed.Sub(began).Milliseconds(), "visibility_ms", time.Since(renewed).Milliseconds())
		}
	}()
	return hb
}

// stop ends the heartbeat, waits for it, and reports whether it was fenced.
func (hb *heartbeat) stop() *ledger.FencedError {
	hb.cancel()
	<-hb.done
	return hb.fenced.Load()
}
