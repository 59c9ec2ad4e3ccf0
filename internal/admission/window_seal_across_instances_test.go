package admission_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestSealedWindowBoundsAdmitsAcrossInstances: two Admitter instances 200 ms apart
// across a window boundary — A still in W's last slot, B in W+1's first —
// A having admitted 1 at W+59 s, each fire 20 concurrent admits at a limit of 5, while B's seal of W has
// its first reply lost (the seal is applied, the reply dropped, the seal
// repeated). Whatever the interleaving, A's admits that land before the
// seal are in the counts B reads, A's admits after it are refused, and
// together no more than 5 are admitted within the 200 ms. Then B's clock
// steps back into W: nothing more is admitted there (W is sealed).
func TestSealedWindowBoundsAdmitsAcrossInstances(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		lim := map[string]admission.Limit{"m1": {RequestsPerWindow: 5, TokensPerWindow: 1_000_000}}
		wKey := admission.WindowKey("m1", t0)
		a := setup(t, e, nil, lim)
		// A warms its cache (seals W-1) with one admit in W's last slot.
		a.clock.Set(t0.Add(59 * time.Second))
		if _, err := a.adm.Admit(context.Background(), "m1", 10); err != nil {
			t.Fatal(err)
		}
		a.clock.Set(t0.Add(59900 * time.Millisecond))
		var lost sync.Once
		b := setup(t, e, faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "DynamoDB.UpdateItem" && c.TaskID == wKey {
				k := faultinject.Kind("")
				lost.Do(func() { k = faultinject.LostReply })
				return k
			}
			return ""
		}), lim)
		b.clock.Set(t0.Add(60100 * time.Millisecond))

		var wg sync.WaitGroup
		var mu sync.Mutex
		admitted := map[string]int{}
		for _, x := range []struct {
			name string
			b    *bundle
		}{{"A", a}, {"B", b}} {
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := x.b.adm.Admit(context.Background(), "m1", 10)
					var na *admission.NotAdmittedError
					switch {
					case err == nil:
						mu.Lock()
						admitted[x.name]++
						mu.Unlock()
					case errors.As(err, &na):
					default:
						t.Errorf("admit on %s: %v", x.name, err)
					}
				}()
			}
		}
		wg.Wait()
		if n := 1 + admitted["A"] + admitted["B"]; n > 5 {
			t.Fatalf("admitted 1 + %v within 1.1 s across the boundary: %d > limit 5", admitted, n)
		}
		if b.inj.Total(faultinject.LostReply) != 1 {
			t.Fatalf("setup: the seal's reply was not lost (%d)", b.inj.Total(faultinject.LostReply))
		}
		// B's clock steps back into W: W is sealed, nothing is admitted.
		b.clock.Set(t0.Add(59950 * time.Millisecond))
		if tk, err := b.adm.Admit(context.Background(), "m1", 10); err == nil {
			t.Fatalf("admitted %+v in a sealed window after the clock stepped back", tk)
		}
		t.Logf("admitted %v", admitted)
	})
}
