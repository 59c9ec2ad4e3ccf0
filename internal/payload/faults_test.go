package payload

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// faulty returns a Store on the same bucket as b whose S3 client injects
// the faults sched picks (around the real emulator).
func faulty(t *testing.T, b *bundle, sched faultinject.ScheduleFunc) (*Store, *faultinject.Injector) {
	t.Helper()
	inj := faultinject.New(sched)
	o := b.s3.Options()
	o.APIOptions = append(append(o.APIOptions[:0:0], o.APIOptions...), inj.Register)
	st, err := New(s3.New(o), b.store.Bucket(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, inj
}

func TestS3FaultsAreSteered(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		body := bytes.Repeat([]byte("z"), 10_000)

		// A lost reply on our own write: the object was stored, the caller
		// saw a timeout. It must be Retryable (not Uncertain) and the retry
		// must succeed with the same reference.
		lost := true
		st, inj := faulty(t, b, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "S3.PutObject" && lost {
				lost = false
				return faultinject.LostReply
			}
			return ""
		})
		_, err := st.PutInput(ctx, body)
		if inj.Total(faultinject.LostReply) != 1 {
			t.Fatalf("no lost reply injected: %v", inj.Injected())
		}
		if c := retrypolicy.Classify(err); c.Class != retrypolicy.Transient {
			t.Fatalf("PutInput after a lost reply: %v classified %v, want transient", err, c.Class)
		}
		r, err := st.PutInput(ctx, body)
		if err != nil || r.SHA256 != Digest(body) {
			t.Fatalf("retry after lost reply = %+v, %v", r, err)
		}
		lostRes := true
		st, _ = faulty(t, b, func(c faultinject.Call) faultinject.Kind {
			if c.Key() == "S3.PutObject" && lostRes {
				lostRes = false
				return faultinject.LostReply
			}
			return ""
		})
		if _, err := st.PutResult(ctx, "task-9", 1700000000000, 3, body); !errors.Is(err, &retrypolicy.Error{Class: retrypolicy.Transient}) {
			t.Fatalf("PutResult lost reply: %v, want Retryable", err)
		}
		if _, err := st.PutResult(ctx, "task-9", 1700000000000, 3, body); err != nil {
			t.Fatalf("PutResult retry after lost reply: %v", err)
		}

		for _, kind := range []faultinject.Kind{faultinject.Throttle, faultinject.SendFailure} {
			st, inj := faulty(t, b, func(c faultinject.Call) faultinject.Kind {
				if c.Key() == "S3.GetObject" {
					return kind
				}
				return ""
			})
			_, err := st.Get(ctx, r)
			if inj.Total(kind) != 1 {
				t.Fatalf("%s not injected", kind)
			}
			if !errors.Is(err, &retrypolicy.Error{Class: retrypolicy.Transient}) || errors.Is(err, ErrIntegrity) || errors.Is(err, ErrNotFound) {
				t.Fatalf("Get under %s: %v, want a Transient steer", kind, err)
			}
		}
	})
}
