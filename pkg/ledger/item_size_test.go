package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

func TestOversizedCompletionIsRefusedBeforeTheWrite(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e)
		ctx := context.Background()
		task := mustCreate(t, b, "big")
		claimed, err := b.l.Claim(ctx, task.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		big := ledger.Completion{Result: `"` + strings.Repeat("x", itemsize.MaxItemBytes) + `"`, ProviderRef: "ref-9"}
		var tl *ledger.ItemTooLargeError
		if err := ledger.CheckCompletion(claimed, big); !errors.As(err, &tl) || tl.Bytes <= itemsize.MaxItemBytes || tl.ResultBytes != len(big.Result) {
			t.Fatalf("CheckCompletion = %v, want ItemTooLargeError with the sizes", err)
		}
		if _, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, big); !errors.As(err, &tl) {
			t.Fatalf("Complete with an oversized result = %v, want ItemTooLargeError", err)
		}
		got, err := b.l.Get(ctx, task.TaskID)
		if err != nil || got.State != ledger.StateRunning || got.Result != "" {
			t.Fatalf("task after the refused write = %+v, %v; want it unchanged", got, err)
		}
		// Exactly at the limit is within it; one byte more is not.
		n, err := ledger.CompletedItemSize(claimed, ledger.Completion{Result: `""`, ProviderRef: "ref-9"})
		if err != nil {
			t.Fatal(err)
		}
		fit := ledger.Completion{Result: `"` + strings.Repeat("y", itemsize.MaxItemBytes-n) + `"`, ProviderRef: "ref-9"}
		if err := ledger.CheckCompletion(claimed, fit); err != nil {
			t.Fatalf("CheckCompletion at the limit = %v", err)
		}
		if err := ledger.CheckCompletion(claimed, ledger.Completion{Result: fit.Result + " ", ProviderRef: "ref-9"}); !errors.As(err, &tl) {
			t.Fatalf("CheckCompletion one byte over = %v", err)
		}
		// Emulators size numbers differently from DynamoDB's (approximate)
		// rule (moto also stops at 405,000 bytes); a result 8 KiB under the
		// limit is saved on every engine.
		under := ledger.Completion{Result: `"` + strings.Repeat("y", itemsize.MaxItemBytes-n-8192) + `"`, ProviderRef: "ref-9"}
		if _, err := b.l.Complete(ctx, task.TaskID, claimed.AssignmentVersion, under); err != nil {
			t.Fatalf("Complete under the limit = %v", err)
		}
	})
}
