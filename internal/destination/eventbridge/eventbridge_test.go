package eventbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/eventbridge"
	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestMain(m *testing.M) { emutest.Main(m) }

const payload = `{"order":"order-4711","summary":"private text 0451"}`

// detailType is the bus destination's configured detail-type.
const detailType = "order.follow_up"

func req(opID string) destination.Request {
	return destination.Request{OperationID: opID, Attempt: 1, Destination: eventbridge.Name,
		Params: json.RawMessage(`{}`), Payload: json.RawMessage(payload), CorrelationID: "corr-1"}
}

func class(err error) retrypolicy.Class { return retrypolicy.Classify(err).Class }

// busEnv is a bus with a rule that matches the destination's events and
// sends them to an SQS queue, plus a way to count what arrived.
type busEnv struct {
	dest   *eventbridge.Destination
	busARN string
	next   atomic.Value // faultinject.Kind for the next PutEvents
	// arrived returns the details that reached the rule's target so far,
	// grouped by operation id.
	arrived func(t *testing.T) map[string][]eventbridge.Detail
}

func setupBus(t *testing.T, be emutest.Backend) *busEnv {
	t.Helper()
	ctx := context.Background()
	env := &busEnv{}
	env.next.Store(faultinject.Kind(""))
	inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
		if c.Operation != "PutEvents" {
			return ""
		}
		return env.next.Swap(faultinject.Kind("")).(faultinject.Kind)
	}))
	eb := awseb.NewFromConfig(be.AWS, func(o *awseb.Options) { o.APIOptions = append(o.APIOptions, inj.Register) })
	q := sqs.NewFromConfig(be.AWS)
	prefix := testenv.UniquePrefix()
	source := "taskledger.test." + prefix

	bus, err := eb.CreateEventBus(ctx, &awseb.CreateEventBusInput{Name: aws.String(prefix + "-bus")})
	if err != nil {
		t.Fatalf("CreateEventBus: %v", err)
	}
	env.busARN = aws.ToString(bus.EventBusArn)
	queue, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-events")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: queue.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	pattern := fmt.Sprintf(`{"source":[%q]}`, source)
	if _, err := eb.PutRule(ctx, &awseb.PutRuleInput{Name: aws.String(prefix + "-rule"), EventBusName: aws.String(prefix + "-bus"), EventPattern: aws.String(pattern)}); err != nil {
		t.Fatalf("PutRule: %v", err)
	}
	target := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if be.Name == "kumo" {
		// kumo forwards rule matches to an SQS target at the base URL fixed
		// when its package initialised (KUMO_HOST/KUMO_PORT, default
		// localhost:4566), not at the in-process server's random port, so
		// the queue would never receive them (and whatever listens on 4566
		// would). kumo records every rule match on its own test endpoint;
		// a log-group target, which it does not forward, keeps the match
		// recorded and nothing leaves the process.
		target = "arn:aws:logs:us-east-1:000000000000:log-group:" + prefix
	}
	if _, err := eb.PutTargets(ctx, &awseb.PutTargetsInput{Rule: aws.String(prefix + "-rule"), EventBusName: aws.String(prefix + "-bus"),
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(target)}}}); err != nil {
		t.Fatalf("PutTargets: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = eb.RemoveTargets(ctx, &awseb.RemoveTargetsInput{Rule: aws.String(prefix + "-rule"), EventBusName: aws.String(prefix + "-bus"), Ids: []string{"queue"}})
		_, _ = eb.DeleteRule(ctx, &awseb.DeleteRuleInput{Name: aws.String(prefix + "-rule"), EventBusName: aws.String(prefix + "-bus")})
		_, _ = eb.DeleteEventBus(ctx, &awseb.DeleteEventBusInput{Name: aws.String(prefix + "-bus")})
		_, _ = q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: queue.QueueUrl})
	})

	env.dest, err = eventbridge.New(eventbridge.Options{BusARN: env.busARN, Source: source, DetailType: detailType, Client: eb})
	if err != nil {
		t.Fatal(err)
	}

	if be.Name == "kumo" {
		// Count the rule matches kumo recorded (see the target above).
		env.arrived = func(t *testing.T) map[string][]eventbridge.Detail {
			return kumoDelivered(t, be.Endpoint, prefix+"-bus")
		}
		return env
	}
	var mu sync.Mutex
	got := map[string][]eventbridge.Detail{}
	env.arrived = func(t *testing.T) map[string][]eventbridge.Detail {
		mu.Lock()
		defer mu.Unlock()
		for {
			out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: queue.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 300, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatalf("ReceiveMessage: %v", err)
			}
			if len(out.Messages) == 0 {
				return got
			}
			for _, m := range out.Messages {
				var ev struct {
					Source string             `json:"source"`
					Type   string             `json:"detail-type"`
					Detail eventbridge.Detail `json:"detail"`
				}
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
					t.Fatalf("queue message is not an event: %v", err)
				}
				if ev.Source != source || ev.Type != detailType {
					t.Errorf("event source %q detail-type %q", ev.Source, ev.Type)
				}
				got[ev.Detail.OperationID] = append(got[ev.Detail.OperationID], ev.Detail)
			}
		}
	}
	return env
}

func kumoDelivered(t *testing.T, endpoint, bus string) map[string][]eventbridge.Detail {
	t.Helper()
	resp, err := http.Get(endpoint + "/kumo/eventbridge/delivered-events")
	if err != nil {
		t.Fatalf("kumo delivered-events: %v", err)
	}
	defer resp.Body.Close()
	var evs []struct {
		EventBusName string `json:"EventBusName"`
		DetailType   string `json:"DetailType"`
		Detail       string `json:"Detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&evs); err != nil {
		t.Fatalf("kumo delivered-events: %v", err)
	}
	got := map[string][]eventbridge.Detail{}
	for _, ev := range evs {
		if ev.EventBusName != bus {
			continue
		}
		if ev.DetailType != detailType {
			t.Errorf("kumo delivered detail-type %q, want the configured %q", ev.DetailType, detailType)
		}
		var d eventbridge.Detail
		if err := json.Unmarshal([]byte(ev.Detail), &d); err != nil {
			t.Fatalf("kumo delivered a detail that is not ours: %v", err)
		}
		got[d.OperationID] = append(got[d.OperationID], d)
	}
	return got
}

// TestPutEventsArrivesOnce puts events on a bus on each emulator and
// proves, through a rule, that each arrived exactly once — including the
// one whose reply was lost, which is uncertain and parks (no readback, not
// idempotent) instead of being sent again.
func TestPutEventsArrivesOnce(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		ctx := context.Background()
		env := setupBus(t, be)

		rc, err := env.dest.Deliver(ctx, req("task-ok"))
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		sum := destination.HashPayload(json.RawMessage(payload))
		if rc.OperationID != "task-ok" || rc.PayloadSHA256 != sum || rc.Destination != "eventbridge" || rc.DestinationIdentity != env.busARN || rc.ProviderRef == "" {
			t.Fatalf("receipt %+v", rc)
		}

		env.next.Store(faultinject.LostReply)
		_, err = env.dest.Deliver(ctx, req("task-lost"))
		if class(err) != retrypolicy.UnknownOutcome {
			t.Fatalf("lost reply: %v (class %v), want unknown_outcome", err, class(err))
		}
		_, dec, err := destination.Resolve(ctx, env.dest, req("task-lost"), false)
		if err != nil || dec.Action != destination.Park || dec.Reason != destination.ReasonUnknownOutcome {
			t.Fatalf("Resolve = %+v, %v; want park unknown_outcome", dec, err)
		}

		env.next.Store(faultinject.Throttle)
		if _, err := env.dest.Deliver(ctx, req("task-throttled")); class(err) != retrypolicy.Transient {
			t.Fatalf("throttled: %v, want transient", err)
		}

		got := env.arrived(t)
		for op, want := range map[string]int{"task-ok": 1, "task-lost": 1, "task-throttled": 0} {
			if n := len(got[op]); n != want {
				t.Errorf("%s arrived %d times, want %d", op, n, want)
			}
		}
		for _, d := range got["task-ok"] {
			if d.PayloadSHA256 != sum || d.CorrelationID != "corr-1" || compact(t, d.Payload) != compact(t, json.RawMessage(payload)) {
				t.Errorf("detail %+v", d)
			}
		}
	})
}

// compact returns raw without insignificant whitespace (moto re-encodes
// the detail).
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact: %v", err)
	}
	return b.String()
}

// TestMissingBus: a bus that does not exist is a configuration problem.
func TestMissingBus(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		eb := awseb.NewFromConfig(be.AWS)
		d, err := eventbridge.New(eventbridge.Options{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/" + testenv.UniquePrefix() + "-absent", Client: eb})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Deliver(context.Background(), req("task-1"))
		if be.Name == "kumo" && err == nil {
			// kumo v0.33 accepts events for a bus it does not have.
			t.Logf("kumo accepted PutEvents to a missing bus (an emulator gap; moto and AWS answer ResourceNotFoundException)")
			return
		}
		if class(err) != retrypolicy.PermanentConfig {
			t.Fatalf("missing bus: %v (class %v), want permanent_config", err, class(err))
		}
	})
}

// fakeEB answers PutEvents with a canned response, or drops the
// connection; it counts requests.
type fakeEB struct {
	requests atomic.Int32
	status   int
	body     string
	lose     bool
}

func (f *fakeEB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	if f.lose {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.body)
}

func fakeDest(t *testing.T, f *fakeEB) *eventbridge.Destination {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	// The SDK would retry a lost reply up to 3 times: the destination must
	// switch that off.
	cfg, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: srv.URL, StaticCredentials: true, Region: "us-east-1", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	d, err := eventbridge.New(eventbridge.Options{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/orders", Client: awseb.NewFromConfig(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLostReplyIsSentOnce(t *testing.T) {
	t.Parallel()
	f := &fakeEB{lose: true}
	d := fakeDest(t, f)
	_, err := d.Deliver(context.Background(), req("task-1"))
	if class(err) != retrypolicy.UnknownOutcome {
		t.Fatalf("err %v (class %v), want unknown_outcome", err, class(err))
	}
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("PutEvents sent %d times after a lost reply, want 1", n)
	}
}

func TestResponseClasses(t *testing.T) {
	t.Parallel()
	entry := func(code string) string {
		return `{"FailedEntryCount":1,"Entries":[{"ErrorCode":"` + code + `","ErrorMessage":"entry refused"}]}`
	}
	apiErr := func(code string) string { return `{"__type":"` + code + `","message":"refused"}` }
	cases := []struct {
		name   string
		status int
		body   string
		want   retrypolicy.Class
	}{
		{"entry throttled", 200, entry("ThrottlingException"), retrypolicy.Transient},
		{"entry internal", 200, entry("InternalFailure"), retrypolicy.Transient},
		{"entry access denied", 200, entry("AccessDeniedException"), retrypolicy.PermanentConfig},
		{"entry source not allowed", 200, entry("NotAuthorizedForSourceException"), retrypolicy.PermanentConfig},
		{"entry malformed", 200, entry("MalformedDetail"), retrypolicy.PermanentInput},
		{"failed count without code", 200, `{"FailedEntryCount":1,"Entries":[{}]}`, retrypolicy.PermanentInput},
		{"no entries", 200, `{"FailedEntryCount":0,"Entries":[]}`, retrypolicy.UnknownOutcome},
		{"api throttled", 400, apiErr("ThrottlingException"), retrypolicy.Transient},
		{"api validation", 400, apiErr("ValidationException"), retrypolicy.PermanentInput},
		{"api not found", 400, apiErr("ResourceNotFoundException"), retrypolicy.PermanentConfig},
		{"api access denied", 400, apiErr("AccessDeniedException"), retrypolicy.PermanentConfig},
		// A server fault follows the call's arrival: the event may be on
		// the bus, and PutEvents is never re-sent blind.
		{"api internal", 500, apiErr("InternalException"), retrypolicy.UnknownOutcome},
		{"api service unavailable", 503, apiErr("ServiceUnavailable"), retrypolicy.UnknownOutcome},
		{"api unmodelled 502", 502, apiErr("BadGateway"), retrypolicy.UnknownOutcome},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEB{status: tc.status, body: tc.body}
			_, err := fakeDest(t, f).Deliver(context.Background(), req("task-1"))
			if class(err) != tc.want {
				t.Fatalf("err %v (class %v), want %v", err, class(err), tc.want)
			}
			if n := f.requests.Load(); n != 1 {
				t.Errorf("sent %d times, want 1 (no SDK retry)", n)
			}
			if strings.Contains(err.Error(), "0451") {
				t.Errorf("error quotes the payload: %v", err)
			}
		})
	}
	var ee *eventbridge.EntryError
	f := &fakeEB{status: 200, body: entry("MalformedDetail")}
	if _, err := fakeDest(t, f).Deliver(context.Background(), req("task-1")); !errors.As(err, &ee) || ee.Code != "MalformedDetail" {
		t.Fatalf("entry error %v", err)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	eb := awseb.New(awseb.Options{Region: "us-east-1"})
	for _, arn := range []string{"", "orders", "arn:aws:sqs:us-east-1:123456789012:orders", "arn:aws:events:us-east-1:123456789012:rule/x", "arn:aws:events::123456789012:event-bus/x"} {
		if _, err := eventbridge.New(eventbridge.Options{BusARN: arn, Client: eb}); class(err) != retrypolicy.PermanentConfig {
			t.Errorf("bus %q: %v, want misconfigured", arn, err)
		}
	}
	if _, err := eventbridge.New(eventbridge.Options{BusARN: "arn:aws:events:us-east-1:123456789012:event-bus/x"}); class(err) != retrypolicy.PermanentConfig {
		t.Errorf("no client: %v", err)
	}
	f := &fakeEB{status: 200, body: `{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}`}
	d := fakeDest(t, f)
	if g := d.Guarantees(); g.Idempotent || g.Mode() != destination.ReadbackNone {
		t.Fatalf("guarantees %+v", g)
	}
	if rc, err := d.Deliver(context.Background(), req("task-1")); err != nil || rc.ProviderRef != "e-1" {
		t.Fatalf("Deliver = %+v, %v", rc, err)
	}
	// Params choose nothing: a detail_type (any, even empty) is refused
	// like an unknown field.
	for _, params := range []string{`{"detail_type":""}`, `{"detail_type":"order.approved"}`, `{"detail_type":"a\u0001"}`, `{"bus":"other"}`} {
		r := req("task-2")
		r.Params = json.RawMessage(params)
		_, err := d.Deliver(context.Background(), r)
		if class(err) != retrypolicy.PermanentInput {
			t.Errorf("params %s: %v, want permanent", params, err)
		}
	}
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1 (bad params never sent)", n)
	}
}
