package destination_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestEvidenceOf(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]destination.Evidence{
		nil:                     destination.Found,
		destination.ErrNotFound: destination.NotFound,
		fmt.Errorf("x: %w", destination.ErrNotFound): destination.NotFound,
		destination.ErrNoReadback:                    destination.Unreadable,
		errors.New("timeout"):                        destination.LookupFailed,
	} {
		if got := destination.EvidenceOf(err); got != want {
			t.Errorf("EvidenceOf(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	var (
		none       = destination.Guarantees{}
		idem       = destination.Guarantees{Idempotent: true}
		byID       = destination.Guarantees{Readback: destination.ReadbackByOperationID}
		byIDCred   = destination.Guarantees{Readback: destination.ReadbackByOperationID, NotFoundCredible: true}
		byRefIdem  = destination.Guarantees{Readback: destination.ReadbackByReference, Idempotent: true}
		unknown    = retrypolicy.UnknownOutcome
		park       = destination.Park
		parkReason = destination.ReasonUnknownOutcome
	)
	cases := []struct {
		name      string
		g         destination.Guarantees
		class     retrypolicy.Class
		ev        destination.Evidence
		exhausted bool
		want      destination.Action
		reason    string
	}{
		{"success", none, 0, destination.NotRead, false, destination.Complete, ""},
		{"transient", none, retrypolicy.Transient, destination.NotRead, false, destination.Retry, ""},
		{"permanent input", none, retrypolicy.PermanentInput, destination.NotRead, false, destination.Fail, ""},
		{"permanent config", idem, retrypolicy.PermanentConfig, destination.NotRead, false, park, destination.ReasonMisconfigured},
		// Uncertain, not read back yet.
		{"uncertain, no readback, not idempotent: park", none, unknown, destination.NotRead, false, park, parkReason},
		{"uncertain, no readback, idempotent: requeue", idem, unknown, destination.NotRead, false, destination.Requeue, ""},
		{"uncertain, readback by id: read back", byID, unknown, destination.NotRead, false, destination.Readback, ""},
		{"uncertain, readback by ref: read back", byRefIdem, unknown, destination.NotRead, false, destination.Readback, ""},
		// Readback answered.
		{"found completes", byID, unknown, destination.Found, false, destination.Complete, ""},
		{"found completes even when exhausted", byID, unknown, destination.Found, true, destination.Complete, ""},
		{"credible not found requeues", byIDCred, unknown, destination.NotFound, false, destination.Requeue, ""},
		{"not found on idempotent requeues", byRefIdem, unknown, destination.NotFound, false, destination.Requeue, ""},
		{"non-credible not found reads again", byID, unknown, destination.NotFound, false, destination.Readback, ""},
		{"non-credible not found, exhausted: park", byID, unknown, destination.NotFound, true, park, parkReason},
		{"no readback answer, not idempotent: park", byID, unknown, destination.Unreadable, false, park, parkReason},
		{"no readback answer, idempotent: requeue", byRefIdem, unknown, destination.Unreadable, false, destination.Requeue, ""},
		{"lookup failed reads again", byIDCred, unknown, destination.LookupFailed, false, destination.Readback, ""},
		{"lookup failed, exhausted: park", byIDCred, unknown, destination.LookupFailed, true, park, parkReason},
		{"unknown class is treated as uncertain", none, retrypolicy.Class(99), destination.NotRead, false, park, parkReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := destination.Decide(destination.Situation{Guarantees: tc.g, Class: tc.class, Evidence: tc.ev, ReadbackExhausted: tc.exhausted})
			if d.Action != tc.want || d.Reason != tc.reason {
				t.Fatalf("Decide = %+v, want %s %q", d, tc.want, tc.reason)
			}
			if d.Why == "" {
				t.Error("no explanation")
			}
		})
	}
}

// TestDecideNeverResendsNonIdempotentWithoutProof walks every combination:
// for a non-idempotent destination with an uncertain outcome, Requeue is
// only ever the answer to a credible "not found".
func TestDecideNeverResendsNonIdempotentWithoutProof(t *testing.T) {
	t.Parallel()
	evs := []destination.Evidence{destination.NotRead, destination.Found, destination.NotFound, destination.Unreadable, destination.LookupFailed}
	modes := []destination.ReadbackMode{"", destination.ReadbackNone, destination.ReadbackByOperationID, destination.ReadbackByReference}
	for _, mode := range modes {
		for _, cred := range []bool{false, true} {
			for _, ev := range evs {
				for _, ex := range []bool{false, true} {
					g := destination.Guarantees{Readback: mode, NotFoundCredible: cred}
					d := destination.Decide(destination.Situation{Guarantees: g, Class: retrypolicy.UnknownOutcome, Evidence: ev, ReadbackExhausted: ex})
					if d.Action == destination.Requeue && !(ev == destination.NotFound && cred) {
						t.Errorf("%v evidence=%q exhausted=%t: re-sends without proof", g, ev, ex)
					}
					if d.Action == destination.Retry {
						t.Errorf("%v evidence=%q: an uncertain outcome is retried", g, ev)
					}
				}
			}
		}
	}
}
