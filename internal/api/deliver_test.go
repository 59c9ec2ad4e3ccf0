package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func withDestinations(t *testing.T) func(*option) {
	reg, err := deliver.NewRegistry(dsim.All(dsim.Options{})...)
	if err != nil {
		t.Fatal(err)
	}
	return withHandler(func(h *api.Handler) { h.Destinations = reg })
}

func deliverBody(input string) string { return `{"kind":"deliver","input":` + input + `}` }

// A deliver submit and its task view, queued and completed with a
// receipt, match the API document; bad deliver input is a 400 naming the
// field and writes nothing; without configured destinations every deliver
// submit is refused.
func TestDeliverSubmitAndView(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		b := setup(t, e, withDestinations(t))
		in := `{"destination":"publish","params":{"slug":"release-2-1"},"payload":{"title":"Release 2.1"}}`
		resp := b.do(t, submitReq("order-4711", deliverBody(in)))
		wantStatus(t, resp, http.StatusAccepted)
		v := view(t, resp)
		if v.Kind != deliver.Kind || v.Receipt.DeliveryReceipt == nil || v.Receipt.Destination != dsim.Publish ||
			v.Receipt.PayloadSHA256 != destination.HashPayload([]byte(`{"title":"Release 2.1"}`)) {
			t.Fatalf("queued deliver view: %s", resp.Body)
		}
		replay := b.do(t, submitReq("order-4711", deliverBody(in)))
		wantStatus(t, replay, http.StatusOK)

		// The worker's completion: the receipt is the result.
		task, err := b.l.Claim(ctx, v.TaskID, ledger.ClaimOptions{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		rc := destination.Receipt{OperationID: v.TaskID, PayloadSHA256: v.Receipt.PayloadSHA256, Destination: dsim.Publish,
			DestinationIdentity: "publish.simulated.invalid", ProviderRef: "pub-1", PublicURL: dsim.PublicBase + "release-2-1",
			ReadbackAt: time.Now().UTC(), ReadbackResult: destination.ReadbackContentMatch}
		out, _ := json.Marshal(rc)
		if _, err := b.l.Complete(ctx, v.TaskID, task.AssignmentVersion, ledger.Completion{Result: string(out), Provider: dsim.Publish, ProviderRef: "pub-1"}); err != nil {
			t.Fatal(err)
		}
		got := b.do(t, getReq(v.TaskID))
		wantStatus(t, got, http.StatusOK)
		cv := view(t, got)
		if cv.Receipt.PublicURL != rc.PublicURL || cv.Receipt.ReadbackResult != destination.ReadbackContentMatch || cv.Receipt.DestinationIdentity != rc.DestinationIdentity ||
			cv.Receipt.ProviderRef != "pub-1" || cv.Receipt.ReadbackAt == "" {
			t.Fatalf("completed deliver view: %s", got.Body)
		}
		// A deliver task is not regenerated.
		wantProblem(t, b.do(t, regenReq(v.TaskID, "regen-1", "")), http.StatusConflict, api.TypeStateConflict)

		before := len(scanTasks(t, e))
		for input, field := range map[string]string{
			`{"destination":"fax","payload":{"a":1}}`:                                    "input.destination",
			`{"destination":"publish","params":{"slug":"Not A Slug"},"payload":{"a":1}}`: "input.params.slug",
			`{"destination":"notify","params":{"to":"a@example.com"},"payload":[1]}`:     "input.payload",
			`{"destination":"notify","payload":{"a":1},"url":"https://x.example"}`:       "input",
		} {
			p := wantProblem(t, b.do(t, submitReq("bad", deliverBody(input))), http.StatusBadRequest, api.TypeInvalidInput)
			if p.Field != field || strings.Contains(p.Detail, "x.example") || strings.Contains(p.Detail, "Not A Slug") {
				t.Errorf("%s: problem %+v, want field %s and no quoted value", input, p, field)
			}
		}
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("rejected deliver submits wrote %d tasks", n-before)
		}

		none := setup(t, e)
		p := wantProblem(t, none.do(t, submitReq("k-none", deliverBody(in))), http.StatusBadRequest, api.TypeInvalidInput)
		if !strings.Contains(p.Detail, "none are configured") {
			t.Fatalf("deliver without destinations: %+v", p)
		}
		wantProblem(t, b.do(t, submitReq("k-kind", `{"kind":"send","input":{}}`)), http.StatusBadRequest, api.TypeInvalidBody)
	})
}

// TestPlanIsCheckedAgainstTheDestinations: with destinations configured, a
// gated submit whose deliver plan names an unconfigured destination or
// params it refuses is a 400 naming the plan entry, and nothing is
// written; a valid plan is accepted.
func TestPlanIsCheckedAgainstTheDestinations(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		b := setup(t, e, withDestinations(t))
		before := len(scanTasks(t, e))
		for deliverPlan, field := range map[string]string{
			`[{"destination":"fax"}]`: "deliver[0].destination",
			`[{"destination":"notify","params":{"to":"a@example.com"}},{"destination":"publish","params":{"slug":"Not A Slug"}}]`: "deliver[1].params.slug",
		} {
			body := `{"kind":"generate","input":{"prompt":"hi"},"approval":{"required":true},"deliver":` + deliverPlan + `}`
			p := wantProblem(t, b.do(t, submitReq("plan-bad", body)), http.StatusBadRequest, api.TypeInvalidBody)
			if p.Field != field || strings.Contains(p.Detail, "Not A Slug") {
				t.Errorf("%s: problem %+v, want field %s and no quoted value", deliverPlan, p, field)
			}
		}
		if n := len(scanTasks(t, e)); n != before {
			t.Fatalf("rejected plans wrote %d tasks", n-before)
		}
		ok := `{"kind":"generate","input":{"prompt":"hi"},"approval":{"required":true},"deliver":[{"destination":"notify","params":{"to":"a@example.com"}}]}`
		wantStatus(t, b.do(t, submitReq("plan-ok", ok)), http.StatusAccepted)
	})
}
