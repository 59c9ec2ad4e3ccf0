package worker_test

import (
	"context"
	"testing"

	"github.com/taskledger/taskledger/internal/worker"
)

// cancelAfterReply returns hooks that cancel the running task (as POST
// /tasks/{id}/cancel does: ledger.CancelRunning on the task as read) right
// after the provider answered, before the worker records the answer; then,
// if not nil, runs next (more of the world moving before the worker's
// write).
func cancelAfterReply(t *testing.T, b *bundle, next func(ctx context.Context, id string)) *worker.Hooks {
	return &worker.Hooks{AfterProvider: func(ctx context.Context, id string) error {
		cur, err := b.l.Get(ctx, id)
		if err != nil {
			return err
		}
		if _, err := b.l.CancelRunning(ctx, cur); err != nil {
			t.Errorf("cancel after the provider answered: %v", err)
		}
		if next != nil {
			next(ctx, id)
		}
		return nil
	}}
}
