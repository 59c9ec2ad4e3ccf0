package eventbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// On each emulator, an event's detail-type is the destination's
// configuration even when the delivery's params try to name another: such
// params are refused before PutEvents (a task recorded before the submit
// refused them is never sent under the name it chose), and what arrives
// carries the configured detail-type and the delivery's provenance in its
// detail, so a rule can route approved deliveries apart from direct ones.
func TestDetailTypeIsTheConfiguredOne(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		ctx := context.Background()
		env := setupBus(t, be)

		named := req("task-named")
		named.Params = json.RawMessage(`{"detail_type":"order.approved"}`)
		named.Provenance = &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:bob"}
		_, err := env.dest.Deliver(ctx, named)
		var pe *destination.ParamsError
		if retrypolicy.Classify(err).Class != retrypolicy.PermanentInput || !errors.As(err, &pe) || pe.Field != "detail_type" || !strings.Contains(pe.Problem, "configuration") {
			t.Fatalf("Deliver with a detail_type param = %v, want a permanent params error on detail_type", err)
		}

		approved := req("task-approved")
		prov := destination.Provenance{Type: destination.ProvenanceApproval, TaskID: "t_gated", ArtifactSHA256: destination.HashPayload(json.RawMessage(payload)), DecidedBy: "jwt:carol", Round: 1}
		approved.Provenance = &prov
		if _, err := env.dest.Deliver(ctx, approved); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		// setupBus's readers check every arrived event's detail-type is
		// the configured one.
		got := env.arrived(t)
		if n := len(got["task-named"]); n != 0 {
			t.Fatalf("the delivery naming a detail_type arrived %d times", n)
		}
		if len(got["task-approved"]) != 1 {
			t.Fatalf("the approved delivery arrived %d times, want 1", len(got["task-approved"]))
		}
		if p := got["task-approved"][0].Provenance; p == nil || *p != prov {
			t.Fatalf("arrived provenance %+v, want %+v", p, prov)
		}
	})
}
