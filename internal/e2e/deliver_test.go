package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// deliverStack is the submit handler, the worker and the reconciler over
// one leg's tables and queue, with a registry of destinations and a
// settable clock.
type deliverStack struct {
	e      *testenv.Env
	clock  *testenv.Clock
	l      *ledger.Ledger
	reg    *deliver.Registry
	submit *api.Handler
	w      *worker.Handler
	rec    *reconciler.Handler
}

func newDeliverStack(t *testing.T, e *testenv.Env) *deliverStack {
	t.Helper()
	ctx := context.Background()
	if _, err := e.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(e.Names.TaskQueueURL),
		Attributes: map[string]string{"ReceiveMessageWaitTimeSeconds": "0"},
	}); err != nil {
		t.Fatal(err)
	}
	s := &deliverStack{e: e, clock: testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))}
	var err error
	s.l, err = ledger.New(e.DDB, ledger.Config{TasksTable: e.Names.TasksTable, ReviewTable: e.Names.ReviewTable, WatchTable: e.Names.WatchTable, Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The provider is idempotency-honouring with a readback: the deliver
	// tasks must not inherit its promises.
	prov := simulated.New(simulated.Options{Seed: 1, Clock: s.clock.Now})
	sender := &dispatch.Sender{SQS: e.SQS, QueueURL: e.Names.TaskQueueURL}
	s.submit = &api.Handler{Ledger: s.l, Dispatch: sender, Destinations: s.reg}
	s.w = &worker.Handler{Ledger: s.l, Provider: prov, Destinations: s.reg, SQS: e.SQS, QueueURL: e.Names.TaskQueueURL, Policy: retrypolicy.Default()}
	s.rec = &reconciler.Handler{Ledger: s.l, Dispatch: sender, Provider: prov, Destinations: s.reg, DLQ: e.SQS, DLQURL: e.Names.DeadLetterQueueURL}
	return s
}

// use registers ds as the stack's destinations (submit, worker and
// reconciler share the registry).
func (s *deliverStack) use(t *testing.T, ds ...destination.Destination) {
	t.Helper()
	reg, err := deliver.NewRegistry(ds...)
	if err != nil {
		t.Fatal(err)
	}
	s.reg = reg
	s.submit.Destinations, s.w.Destinations, s.rec.Destinations = reg, reg, reg
}

func (s *deliverStack) call(t *testing.T, method, path, key, body string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	h := map[string]string{}
	if body != "" {
		h["content-type"] = "application/json"
	}
	if key != "" {
		h["idempotency-key"] = key
	}
	route := method + " " + path
	if strings.HasPrefix(path, "/tasks/") {
		route = method + " /tasks/{id}"
	}
	resp, err := s.submit.Handle(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route, RawPath: path, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// submitDeliver submits a deliver task and returns its id.
func (s *deliverStack) submitDeliver(t *testing.T, key, input string) string {
	t.Helper()
	resp := s.call(t, http.MethodPost, "/tasks", key, `{"kind":"deliver","input":`+input+`}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit deliver = %d %s; want 202", resp.StatusCode, resp.Body)
	}
	var v api.TaskView
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil || v.TaskID == "" || v.Kind != deliver.Kind {
		t.Fatalf("task view %s: %v", resp.Body, err)
	}
	return v.TaskID
}

// work hands every queued message to the worker once.
func (s *deliverStack) work(t *testing.T) {
	t.Helper()
	msgs := receive(t, s.e, 0)
	if len(msgs) == 0 {
		t.Fatal("no message on the task queue")
	}
	if _, err := s.w.Handle(context.Background(), events.SQSEvent{Records: msgs}); err != nil {
		t.Fatal(err)
	}
}

// reconcile runs the reconciler once, Settle later.
func (s *deliverStack) reconcile(t *testing.T) reconciler.Summary {
	t.Helper()
	s.clock.Advance(reconciler.DefaultSettle + time.Second)
	sum, err := s.rec.Handle(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func (s *deliverStack) task(t *testing.T, id string) *ledger.Task {
	t.Helper()
	got, err := s.l.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (s *deliverStack) view(t *testing.T, id string) (api.TaskView, map[string]any) {
	t.Helper()
	resp := s.call(t, http.MethodGet, "/tasks/"+id, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /tasks/%s = %d %s", id, resp.StatusCode, resp.Body)
	}
	var v api.TaskView
	var raw map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(resp.Body), &raw)
	return v, raw
}

func newSim(t *testing.T, name string, o dsim.Options) *dsim.Destination {
	t.Helper()
	d, err := dsim.New(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const notifyInput = `{"destination":"notify","params":{"to":"requester@example.com"},"payload":{"order":"order-4711","summary":"private 0451"}}`

// Seed 002: a direct deliver with a business key is validated strictly,
// deduplicated like a generate task, delivered once, and its receipt is on
// the task view with every field of DESIGN §10.
func TestDirectDeliverIsDeliveredOnceWithAReceipt(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newDeliverStack(t, e)
		notify := newSim(t, dsim.Notify, dsim.Options{Now: s.clock.Now})
		s.use(t, notify)

		// Bad input changes nothing: an unknown destination, bad params, a
		// missing payload — each a 400 problem naming the field.
		for _, c := range []struct{ input, field string }{
			{`{"destination":"fax","payload":{"a":1}}`, "input.destination"},
			{`{"destination":"notify","params":{"to":"x@example.com","cc":"y"},"payload":{"a":1}}`, "input.params"},
			{`{"destination":"notify","params":{"to":"x@example.com"}}`, "input.payload"},
			{`{"destination":"notify","payload":{"a":1},"url":"https://evil.example"}`, "input"},
		} {
			resp := s.call(t, http.MethodPost, "/tasks", "bad-"+c.field, `{"kind":"deliver","input":`+c.input+`}`)
			var p struct {
				Type, Detail, Field string
			}
			_ = json.Unmarshal([]byte(resp.Body), &p)
			if resp.StatusCode != http.StatusBadRequest || resp.Headers["Content-Type"] != "application/problem+json" ||
				p.Type != api.TypeInvalidInput || !strings.HasPrefix(p.Field, c.field) {
				t.Fatalf("deliver input %s = %d %v %s; want 400 invalid-input on %s", c.input, resp.StatusCode, resp.Headers, resp.Body, c.field)
			}
			if strings.Contains(resp.Body, "evil.example") || strings.Contains(resp.Body, "y@") {
				t.Fatalf("problem quotes a value: %s", resp.Body)
			}
			if _, err := s.l.Get(ctx, s.l.TaskID("anonymous", "bad-"+c.field)); err == nil {
				t.Fatalf("a rejected deliver submit wrote a task")
			}
		}
		if msgs := receive(t, e, 0); len(msgs) != 0 {
			t.Fatalf("%d messages after rejected submits", len(msgs))
		}

		id := s.submitDeliver(t, "order-4711", notifyInput)
		// Same key, same payload (other key order): the same task, replayed.
		replay := s.call(t, http.MethodPost, "/tasks", "order-4711",
			`{"input":{"payload":{"summary":"private 0451","order":"order-4711"},"params":{"to":"requester@example.com"},"destination":"notify"},"kind":"deliver"}`)
		if replay.StatusCode != http.StatusOK || replay.Headers["Idempotent-Replayed"] != "true" || !strings.Contains(replay.Body, id) {
			t.Fatalf("replay = %d %v %s; want 200 replayed %s", replay.StatusCode, replay.Headers, replay.Body, id)
		}
		// Same key, another payload: 422, nothing written.
		other := s.call(t, http.MethodPost, "/tasks", "order-4711", `{"kind":"deliver","input":{"destination":"notify","params":{"to":"requester@example.com"},"payload":{"order":"order-4712"}}}`)
		if other.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("same key, other payload = %d %s; want 422", other.StatusCode, other.Body)
		}

		msgs := receive(t, e, 0)
		if len(msgs) != 1 {
			t.Fatalf("%d messages after one accepted deliver, want 1", len(msgs))
		}
		// The message delivered twice at once: one claim wins, one side effect.
		dup := msgs[0]
		dup.MessageId += "-dup"
		if _, err := s.w.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msgs[0], dup}}); err != nil {
			t.Fatal(err)
		}
		got := s.task(t, id)
		if got.State != ledger.StateCompleted || got.Provider != dsim.Notify {
			t.Fatalf("deliver task: state %s provider %q; want completed by notify", got.State, got.Provider)
		}
		if n := notify.SideEffects(id); n != 1 {
			t.Fatalf("notify side effects = %d, want 1", n)
		}
		v, raw := s.view(t, id)
		canon, _ := api.CanonicalJSON([]byte(`{"order":"order-4711","summary":"private 0451"}`))
		rc := v.Receipt
		if rc.DeliveryReceipt == nil || rc.OperationID != id || rc.Destination != dsim.Notify || rc.DestinationIdentity == "" ||
			rc.ProviderRef == "" || rc.PayloadSHA256 != destination.HashPayload(canon) || rc.ReadbackAt != "" {
			t.Fatalf("receipt %+v %+v", rc, rc.DeliveryReceipt)
		}
		fields := raw["receipt"].(map[string]any)
		for _, f := range []string{"operation_id", "payload_sha256", "destination", "destination_identity", "provider_ref",
			"public_url", "readback_result", "approved_by", "approved_at", "policy"} {
			if _, ok := fields[f]; !ok {
				t.Errorf("receipt lacks %q: %v", f, fields)
			}
		}
		// A deliver task is not regenerated.
		if resp := s.call(t, http.MethodPost, "/tasks/"+id+"/regenerate", "regen-1", ""); resp.StatusCode != http.StatusConflict {
			t.Fatalf("regenerate a deliver task = %d %s; want 409", resp.StatusCode, resp.Body)
		}
	})
}

// Seed 000's experiment: the destination accepts and loses its reply. The
// task goes to unknown, the reconciler's readback finds the one delivery
// and completes it with the read-back receipt; the destination is never
// called again.
func TestDeliverLostReplyIsReadBackNotResent(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDeliverStack(t, e)
		crm := newSim(t, dsim.CRM, dsim.Options{Now: s.clock.Now})
		s.use(t, crm)
		id := s.submitDeliver(t, "follow-up-1", `{"destination":"crm","params":{"client_reference":"acme-17"},"payload":{"follow_up":"call back"}}`)
		crm.Script(id, dsim.AcceptLoseReply)
		s.work(t)
		if got := s.task(t, id); got.State != ledger.StateUnknown {
			t.Fatalf("after a lost reply: %s, want unknown", got.State)
		}
		if sum := s.reconcile(t); sum.ReadbackFound != 1 {
			t.Fatalf("reconciler: %+v; want one readback found", sum)
		}
		got := s.task(t, id)
		if got.State != ledger.StateCompleted || got.ReadbackAt == "" {
			t.Fatalf("after readback: %s readback_at %q; want completed from readback", got.State, got.ReadbackAt)
		}
		if c, n := crm.Calls(id), crm.SideEffects(id); c != 1 || n != 1 {
			t.Fatalf("crm calls %d, side effects %d; want 1 and 1", c, n)
		}
		v, _ := s.view(t, id)
		if v.Receipt.ReadbackResult != destination.ReadbackFound || v.Receipt.ReadbackAt == "" || v.Receipt.ProviderRef == "" {
			t.Fatalf("receipt after readback: %+v %+v", v.Receipt, v.Receipt.DeliveryReceipt)
		}
	})
}

// Without a readback, a lost reply on a non-idempotent destination parks
// the task unknown_outcome with a review saying what is known; the
// destination was called exactly once, and a redelivered message or
// another reconciler run does not call it again.
func TestDeliverLostReplyWithoutReadbackParks(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newDeliverStack(t, e)
		notify := newSim(t, dsim.Notify, dsim.Options{Now: s.clock.Now, Guarantees: &destination.Guarantees{Readback: destination.ReadbackNone}})
		s.use(t, notify)
		id := s.submitDeliver(t, "notify-1", notifyInput)
		notify.Script(id, dsim.AcceptLoseReply)
		msgs := receive(t, e, 0)
		if _, err := s.w.Handle(ctx, events.SQSEvent{Records: msgs}); err != nil {
			t.Fatal(err)
		}
		got := s.task(t, id)
		if got.State != ledger.StateUnknown || got.CallStartedVersion != got.AssignmentVersion {
			t.Fatalf("after a lost reply: %s (call started at v%d, assignment v%d); want unknown with the call-start mark", got.State, got.CallStartedVersion, got.AssignmentVersion)
		}
		// The same message again: acknowledged, no call.
		if _, err := s.w.Handle(ctx, events.SQSEvent{Records: msgs}); err != nil {
			t.Fatal(err)
		}
		s.reconcile(t)
		s.reconcile(t)
		got = s.task(t, id)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("after the reconciler: %s %s; want needs_review unknown_outcome", got.State, got.ReviewReason)
		}
		if c := notify.Calls(id); c != 1 {
			t.Fatalf("notify calls = %d, want exactly 1", c)
		}
		v, _ := s.view(t, id)
		all := v.Review.Summary + strings.Join(v.Review.Known, "|") + strings.Join(v.Review.Uncertain, "|")
		for _, want := range []string{"destination notify", "not sent again", "idempotent=false readback=none", "no readback"} {
			if !strings.Contains(all, want) {
				t.Errorf("review lacks %q: %+v", want, v.Review)
			}
		}
		if strings.Contains(all, "private 0451") || strings.Contains(all, "requester@") {
			t.Fatalf("review quotes the payload or params: %+v", v.Review)
		}
	})
}

// Seed 001: a publication whose readback lags. The first readback does not
// find it (and a "not found" there is not credible): the task stays
// unknown, is never re-sent, and a later readback within the budget finds
// the content at its public URL.
func TestDeliverDelayedReadbackIsFoundOnRecheck(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDeliverStack(t, e)
		publish := newSim(t, dsim.Publish, dsim.Options{Now: s.clock.Now, ReadbackDelay: 3 * time.Minute})
		s.use(t, publish)
		id := s.submitDeliver(t, "release-2.1", `{"destination":"publish","params":{"slug":"release-2-1"},"payload":{"title":"Release 2.1"}}`)
		publish.Script(id, dsim.AcceptLoseReply)
		s.work(t)
		if sum := s.reconcile(t); sum.ReadbackErrors != 1 {
			t.Fatalf("first readback: %+v; want one not-yet-visible", sum)
		}
		if got := s.task(t, id); got.State != ledger.StateUnknown {
			t.Fatalf("after a lagging readback: %s, want still unknown", got.State)
		}
		s.clock.Advance(3 * time.Minute)
		if sum := s.reconcile(t); sum.ReadbackFound != 1 {
			t.Fatalf("re-check: %+v; want found", sum)
		}
		v, _ := s.view(t, id)
		if v.State != string(ledger.StateCompleted) || v.Receipt.ReadbackResult != destination.ReadbackContentMatch ||
			!strings.HasPrefix(v.Receipt.PublicURL, dsim.PublicBase) {
			t.Fatalf("after the re-check: %s %+v %+v", v.State, v.Receipt, v.Receipt.DeliveryReceipt)
		}
		if c := publish.Calls(id); c != 1 {
			t.Fatalf("publish calls = %d, want 1", c)
		}
	})
}

// A lagging readback that never shows the delivery parks the task when the
// age budget ends, saying so; it is never re-sent.
func TestDeliverReadbackNeverVisibleParksAtTheBudget(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDeliverStack(t, e)
		publish := newSim(t, dsim.Publish, dsim.Options{Now: s.clock.Now, ReadbackDelay: 48 * time.Hour})
		s.use(t, publish)
		id := s.submitDeliver(t, "release-2.2", `{"destination":"publish","params":{"slug":"release-2-2"},"payload":{"title":"Release 2.2"}}`)
		publish.Script(id, dsim.AcceptLoseReply)
		s.work(t)
		s.reconcile(t)
		s.clock.Advance(retrypolicy.DefaultMaxAge)
		s.reconcile(t)
		got := s.task(t, id)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("at the age budget: %s %s; want parked unknown_outcome", got.State, got.ReviewReason)
		}
		v, _ := s.view(t, id)
		if !strings.Contains(strings.Join(v.Review.Known, "|"), "never showed the delivery") {
			t.Fatalf("review does not say the readback never showed it: %+v", v.Review)
		}
		if c := publish.Calls(id); c != 1 {
			t.Fatalf("publish calls = %d, want 1", c)
		}
	})
}

// A worker that dies after its claim leaves an expired lease. The worker's
// provider allows takeovers, but a deliver task is never taken over: the
// reconciler reads the destination back, a credible "not found" proves
// nothing was delivered, and the re-queued task is delivered once.
func TestDeliverExpiredLeaseIsReadBackThenDeliveredOnce(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newDeliverStack(t, e)
		notify := newSim(t, dsim.Notify, dsim.Options{Now: s.clock.Now})
		s.use(t, notify)
		id := s.submitDeliver(t, "notify-2", notifyInput)
		msgs := receive(t, e, 0)
		dying := *s.w
		dying.Hooks = &worker.Hooks{AfterClaim: func(context.Context, string) error { return context.Canceled }}
		if _, err := dying.Handle(ctx, events.SQSEvent{Records: msgs}); err != nil {
			t.Fatal(err)
		}
		s.clock.Advance(worker.DefaultLease + time.Minute)
		// A takeover claim is refused for a deliver task.
		if _, err := s.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "thief", AllowTakeover: true, TakeoverKind: "generate"}); err == nil {
			t.Fatal("a deliver task with an expired lease was taken over")
		}
		if _, err := s.w.Handle(ctx, events.SQSEvent{Records: msgs}); err != nil {
			t.Fatal(err)
		}
		if c := notify.Calls(id); c != 0 {
			t.Fatalf("notify called %d times on an expired lease", c)
		}
		s.reconcile(t) // expired → unknown
		s.reconcile(t) // readback: credibly not found → re-queued
		if got := s.task(t, id); got.State != ledger.StateQueued {
			t.Fatalf("after the readback: %s, want queued", got.State)
		}
		s.work(t)
		if got := s.task(t, id); got.State != ledger.StateCompleted || notify.SideEffects(id) != 1 || notify.Calls(id) != 1 {
			t.Fatalf("after the re-queue: %s, calls %d, side effects %d; want completed, 1, 1", got.State, notify.Calls(id), notify.SideEffects(id))
		}
	})
}

// An idempotent destination may be re-sent after an uncertain outcome: the
// retry returns the first delivery, and there is one side effect.
func TestDeliverIdempotentDestinationIsRetried(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDeliverStack(t, e)
		crm := newSim(t, dsim.CRM, dsim.Options{Now: s.clock.Now, Guarantees: &destination.Guarantees{Idempotent: true}})
		s.use(t, crm)
		id := s.submitDeliver(t, "crm-2", `{"destination":"crm","payload":{"follow_up":"call back"}}`)
		crm.Script(id, dsim.AcceptLoseReply)
		s.work(t)
		if got := s.task(t, id); got.State != ledger.StateRetryWait {
			t.Fatalf("after a lost reply on an idempotent destination: %s, want retry_wait", got.State)
		}
		s.clock.Advance(time.Hour / 2)
		if err := s.submitAgain(t, id); err != nil {
			t.Fatal(err)
		}
		s.work(t)
		if got := s.task(t, id); got.State != ledger.StateCompleted || crm.SideEffects(id) != 1 || crm.Calls(id) != 2 {
			t.Fatalf("after the retry: %s, calls %d, side effects %d; want completed, 2, 1", got.State, crm.Calls(id), crm.SideEffects(id))
		}
	})
}

// submitAgain puts the task's message back on the queue (as the worker's
// delayed retry message would arrive).
func (s *deliverStack) submitAgain(t *testing.T, id string) error {
	t.Helper()
	// The worker's retry made the message visible later; drain whatever
	// is visible and send a fresh reference.
	_ = receive(t, s.e, 0)
	return (&dispatch.Sender{SQS: s.e.SQS, QueueURL: s.e.Names.TaskQueueURL}).Send(context.Background(), id, "", 0)
}

// A destination that is no longer configured when the worker runs the task
// parks it destination_config, worded for the delivery, with nothing
// delivered; the input is not at fault, so it does not fail.
func TestDeliverToAnUnconfiguredDestinationParks(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		s := newDeliverStack(t, e)
		notify := newSim(t, dsim.Notify, dsim.Options{Now: s.clock.Now})
		s.use(t, notify)
		id := s.submitDeliver(t, "notify-gone", notifyInput)
		crm := newSim(t, dsim.CRM, dsim.Options{Now: s.clock.Now})
		reg, err := deliver.NewRegistry(crm)
		if err != nil {
			t.Fatal(err)
		}
		s.w.Destinations = reg // the worker's configuration lost notify
		s.work(t)
		got := s.task(t, id)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != "destination_config" || notify.Calls(id) != 0 {
			t.Fatalf("deliver to a destination gone from the configuration: %s %s, notify calls %d; want needs_review destination_config, 0", got.State, got.ReviewReason, notify.Calls(id))
		}
		v, _ := s.view(t, id)
		if !strings.Contains(v.Review.Summary, "destination notify") || !strings.Contains(strings.Join(v.Review.Known, "|"), "nothing was delivered") {
			t.Fatalf("review: %+v", v.Review)
		}
	})
}

// A deliver task cancelled while running (its worker fenced mid-attempt)
// ends cancelled only when a readback proves the delivery absent; on an
// idempotent destination without readback — where a re-send would be
// harmless but nothing proves absence — it is parked for a person.
func TestDeliverCancelledWhileRunning(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		s := newDeliverStack(t, e)
		notify := newSim(t, dsim.Notify, dsim.Options{Now: s.clock.Now})
		crm := newSim(t, dsim.CRM, dsim.Options{Now: s.clock.Now, Guarantees: &destination.Guarantees{Idempotent: true, Readback: destination.ReadbackNone}})
		s.use(t, notify, crm)
		proven := s.submitDeliver(t, "cancel-1", notifyInput)
		unproven := s.submitDeliver(t, "cancel-2", `{"destination":"crm","payload":{"follow_up":"call back"}}`)
		_ = receive(t, e, 0)
		for _, id := range []string{proven, unproven} {
			task, err := s.l.Claim(ctx, id, ledger.ClaimOptions{Owner: "slow-worker", Lease: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.l.CancelRunning(ctx, task); err != nil {
				t.Fatal(err)
			}
		}
		s.reconcile(t)
		s.reconcile(t)
		if got := s.task(t, proven); got.State != ledger.StateCancelled {
			t.Fatalf("cancelled while running, readback credibly absent: %s, want cancelled", got.State)
		}
		got := s.task(t, unproven)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome {
			t.Fatalf("cancelled while running, idempotent without readback: %s %s, want needs_review unknown_outcome", got.State, got.ReviewReason)
		}
		if notify.Calls(proven)+crm.Calls(unproven) != 0 {
			t.Fatal("a cancelled delivery was sent")
		}
	})
}
