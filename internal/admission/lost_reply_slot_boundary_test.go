package admission_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestLostReplyAcrossASlotBoundaryKeepsTheRollingLimit: an Admit whose
// reply is lost lands in slot 1 (at 9.9 s); its retry runs in slot 2 (at
// 10.1 s) and finds its own write. The ticket must name the slot the call
// was counted in: Release and Settle correct that slot, and the next
// minute's admits count the previous minute's slots from their own on.
// A ticket naming the retry's slot gives back slot 2 what slot 1 holds,
// leaving slot 2 at -1 request, so at 70 s the previous minute "frees"
// one request more than it ever held: with a limit of 1 per minute, two
// calls are admitted at the same instant.
func TestLostReplyAcrossASlotBoundaryKeepsTheRollingLimit(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		key := admission.WindowKey("m1", t0)
		b := setup(t, e, faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == key && c.N == 1 {
				return faultinject.LostReply
			}
			return ""
		}), map[string]admission.Limit{"m1": {RequestsPerWindow: 1, TokensPerWindow: 1000}})
		b.clock.Set(t0.Add(9900 * time.Millisecond))
		b.inj.OnInject = func(faultinject.Call, faultinject.Kind) { b.clock.Set(t0.Add(10100 * time.Millisecond)) }
		tk, err := b.adm.Admit(ctx, "m1", 100)
		if err != nil {
			t.Fatalf("admit after a lost reply: %v", err)
		}
		if b.inj.Total(faultinject.LostReply) != 1 || tk.Writes != 2 {
			t.Fatalf("setup: lost replies %d, writes %d; want 1 and 2", b.inj.Total(faultinject.LostReply), tk.Writes)
		}
		if tk.Slot != 1 || !tk.ValidUntil.Equal(t0.Add(10*time.Second)) {
			t.Errorf("ticket slot %d valid until %s; want slot 1 (where the write counted it), valid until %s",
				tk.Slot, tk.ValidUntil, t0.Add(10*time.Second))
		}
		// The call is not made after all (a budget parked the task).
		if err := b.adm.Release(ctx, tk); err != nil {
			t.Fatal(err)
		}
		b.clock.Set(t0.Add(70 * time.Second))
		admitted := 0
		for range 2 {
			_, err := b.adm.Admit(ctx, "m1", 100)
			var na *admission.NotAdmittedError
			switch {
			case err == nil:
				admitted++
			case errors.As(err, &na):
			default:
				t.Fatalf("admit: %v", err)
			}
		}
		if admitted > 1 {
			t.Fatalf("%d calls admitted at the same instant with a limit of 1 per minute", admitted)
		}
	})
}
