package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// Bounds of repeat: at most saveRepeats more sends (by default about 7 s
// of waits in all on average, 9 s at most), never past saveReserve before
// the invocation's deadline.
const (
	saveRepeats = 8
	saveBackoff = 100 * time.Millisecond
	saveReserve = time.Second
)

// save runs write, one fenced write that settles the attempt, and repeats it
// with the same nonce under a heartbeat while it fails for a reason that may
// pass (doc.go, "Failed settling writes"). It returns the last error: nil, a
// definitive one (*ledger.FencedError, an invalid or oversized write), or the
// transient one that outlasted the repeats.
func (h *Handler) save(ctx context.Context, rec events.SQSMessage, t *ledger.Task, op string, write func(...ledger.WriteOption) (*ledger.Task, error), log *slog.Logger) error {
	// InAttempt: a write that ends the attempt records it in the task's history.
	nonce, attempt := ledger.WithNonce(ledger.NewNonce()), ledger.InAttempt(t)
	try := func() error { _, err := write(nonce, attempt); return err }
	err := try()
	if !transient(ctx, err) {
		return err
	}
	hb := h.startHeartbeat(ctx, func(error) {}, rec, t, log)
	defer hb.stop()
	return h.repeat(ctx, op+" failed; repeating the same write", err, try, func(err error) bool { return transient(ctx, err) }, log)
}

// repeat sends try again after it failed with err, while mayPass says its
// error may pass, within the bounds above. It returns the last error.
func (h *Handler) repeat(ctx context.Context, msg string, err error, try func() error, mayPass func(error) bool, log *slog.Logger) error {
	base := orDefault(h.SaveBackoff, saveBackoff)
	for i := range saveRepeats {
		// SaveBackoff doubled i times, capped at 20 times it, half of it jittered.
		wait := min(base<<i, 20*base)
		wait = wait/2 + rand.N(wait/2+1)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait+saveReserve {
			break
		}
		log.WarnContext(ctx, msg, "repeat", i+1, "wait_ms", wait.Milliseconds(), "error", err.Error())
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		if err = try(); !mayPass(err) {
			return err
		}
	}
	return err
}

// transient reports whether a settling write's error may pass when the same
// write is sent again.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var fe *ledger.FencedError
	var tl *ledger.ItemTooLargeError
	var ce *ledger.ConflictError
	switch {
	case errors.As(err, &fe), errors.As(err, &tl), errors.As(err, &ce), ledger.IsValidation(err), ledger.IsAlreadyParked(err),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	}
	return true
}
