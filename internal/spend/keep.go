package spend

import (
	"context"
	"fmt"
	"time"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// RecordExpiredError says a budget's item is gone and may have held spend:
// the task whose chain (or own) budget it is was created at least
// Retention ago, so a reservation made on it since may have expired with
// the item, and the spend it counted is not known any more. Running the
// task again would start that budget from nothing spent.
type RecordExpiredError struct {
	TaskID    string
	Key       string // the budget key (ChainKey or TaskKey)
	Created   time.Time
	Retention time.Duration
}

func (e *RecordExpiredError) Error() string {
	return fmt.Sprintf("spend: the budget record %s of task %s is gone: the task was created %s, more than the %s the record is kept after the chain's last reservation, so what it had spent is not known any more",
		e.Key, e.TaskID, e.Created.UTC().Format(time.RFC3339), e.Retention)
}

// Keep makes the budget items of t that exist outlive now + Retention
// (Extend, one conditional UpdateItem each), before t runs again — an
// operator's retry of a parked task, which can come any time after it was
// parked — or gains a regenerate: keys are t's ChainKey and, for a retry,
// its TaskKey. A task without a budget has none (nothing is done).
//
// An item that does not exist was either never reserved on, or deleted by
// its TTL. Every reservation and every regenerate since t was created kept
// the item at least Retention, so while t is younger than that an absent
// item was never reserved on; from then on it may have been, and Keep
// returns a *RecordExpiredError instead of letting the budget restart at
// zero (the caller refuses the action and says why).
func (a *Accountant) Keep(ctx context.Context, t *ledger.Task, keys ...string) error {
	if !t.HasBudget() {
		return nil
	}
	for _, key := range keys {
		extended, err := a.Extend(ctx, key)
		if err != nil {
			return err
		}
		if extended {
			continue
		}
		item, err := a.get(ctx, BudgetItemKey(key))
		if err != nil {
			return err
		}
		if len(item) > 0 {
			continue // lives longer already
		}
		if created := t.Created(); a.c.Now().Sub(created) >= a.c.Retention {
			return &RecordExpiredError{TaskID: t.TaskID, Key: key, Created: created, Retention: a.c.Retention}
		}
	}
	return nil
}
