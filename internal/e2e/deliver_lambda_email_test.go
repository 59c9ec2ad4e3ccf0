package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// invokeAPI serves the Lambda Invoke API for the example function's handler
// in process. An operation id in lose is acted on, then its reply is
// dropped (the connection closed), as a client timeout after the function
// ran would look.
type invokeAPI struct {
	h *example.Handler

	mu      sync.Mutex
	lose    map[string]bool
	actions map[string][]string // operation id → the actions invoked
}

func (f *invokeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var ev lambda.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.actions[ev.OperationID] = append(f.actions[ev.OperationID], ev.Action)
	lose := ev.Action == lambda.ActionDeliver && f.lose[ev.OperationID]
	f.mu.Unlock()
	reply, err := f.h.Handle(r.Context(), ev)
	if lose {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	if err != nil {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		typ := "errorString"
		if _, ok := err.(*example.Rejected); ok {
			typ = "Rejected"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"errorType": typ, "errorMessage": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(reply)
}

func (f *invokeAPI) invoked(opID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.actions[opID]...)
}

// The lambda destination through the worker and the reconciler on both
// engines: a delivery completes with the function's receipt; a lost reply
// leaves the task unknown, the reconciler's lookup finds the record, and
// the function is never invoked to deliver twice.
func TestLambdaDeliverEndToEnd(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		store := example.NewMemory()
		fn := &invokeAPI{h: &example.Handler{Store: store}, lose: map[string]bool{}, actions: map[string][]string{}}
		srv := httptest.NewServer(fn)
		t.Cleanup(srv.Close)
		client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
		s := newDeliverStack(t, e)
		cfg, err := deliver.ParseConfig(`{"lambda":{"functions":{"orders":{"function":"arn:aws:lambda:us-east-1:123456789012:function:orders","lookup":true,"not_found_credible":true,"timeout":"2s"}}}}`)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := deliver.Build(cfg, deliver.Deps{Lambda: client, Now: s.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		s.reg = reg
		s.submit.Destinations, s.w.Destinations, s.rec.Destinations = reg, reg, reg

		// A function configuration does not name is refused at submit.
		if resp := s.call(t, http.MethodPost, "/tasks", "fn-0", `{"kind":"deliver","input":{"destination":"lambda","params":{"function":"arn:aws:lambda:us-east-1:123456789012:function:other"},"payload":{"a":1}}}`); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("unconfigured function = %d %s; want 400", resp.StatusCode, resp.Body)
		}

		id := s.submitDeliver(t, "fn-1", `{"destination":"lambda","params":{"function":"orders"},"payload":{"order":"order-4711"}}`)
		s.work(t)
		v, _ := s.view(t, id)
		if v.State != string(ledger.StateCompleted) || !strings.HasPrefix(v.Receipt.ProviderRef, "ex_") || v.Receipt.Destination != "lambda" {
			t.Fatalf("lambda delivery: %s %+v", v.State, v.Receipt)
		}

		lost := s.submitDeliver(t, "fn-2", `{"destination":"lambda","params":{"function":"orders"},"payload":{"order":"order-4712"}}`)
		fn.mu.Lock()
		fn.lose[lost] = true
		fn.mu.Unlock()
		s.work(t)
		if got := s.task(t, lost); got.State != ledger.StateUnknown {
			t.Fatalf("after the function's reply was lost: %s, want unknown", got.State)
		}
		if sum := s.reconcile(t); sum.ReadbackFound != 1 {
			t.Fatalf("reconciler: %+v; want the delivery read back", sum)
		}
		if got := s.task(t, lost); got.State != ledger.StateCompleted {
			t.Fatalf("after the lookup: %s, want completed", got.State)
		}
		if acts, calls := store.Acts(), fn.invoked(lost); acts != 2 || strings.Join(calls, ",") != "deliver,lookup" {
			t.Fatalf("the function acted %d times in all and saw %v for the lost one; want 2 and deliver,lookup", acts, calls)
		}
	})
}

// The email destination through the worker and the reconciler on both
// emulators' SES v2: an address outside the allow-list is a 400 at submit;
// a lost SendEmail reply is never re-sent (no readback, not idempotent)
// and parks the task for a person after exactly one send.
func TestEmailDeliverEndToEnd(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		var sends atomic.Int32
		var loseNext atomic.Bool
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation != "SendEmail" {
				return ""
			}
			sends.Add(1)
			if loseNext.Swap(false) {
				return faultinject.LostReply
			}
			return ""
		}))
		ses := sesv2.NewFromConfig(e.AWS, func(o *sesv2.Options) { o.APIOptions = append(o.APIOptions, inj.Register) })
		domain := strings.ToLower(testenv.UniquePrefix()) + ".example.net"
		if _, err := ses.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(domain)}); err != nil {
			t.Fatalf("CreateEmailIdentity: %v", err)
		}
		s := newDeliverStack(t, e)
		reg, err := deliver.Build(deliver.Config{Email: &deliver.EmailConfig{From: "noreply@" + domain, AllowedRecipients: []string{"@team.example.org"}}}, deliver.Deps{SES: ses, Now: s.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		s.reg = reg
		s.submit.Destinations, s.w.Destinations, s.rec.Destinations = reg, reg, reg

		resp := s.call(t, http.MethodPost, "/tasks", "em-0", `{"kind":"deliver","input":{"destination":"email","params":{"to":["eve@evil.example"]},"payload":{"text":"hi"}}}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "input.params.to[0]") {
			t.Fatalf("a recipient outside the allow-list = %d %s; want 400 naming input.params.to[0]", resp.StatusCode, resp.Body)
		}

		id := s.submitDeliver(t, "em-1", `{"destination":"email","params":{"to":["dana@team.example.org"],"subject":"Order 4711"},"payload":{"text":"Ships Monday."}}`)
		s.work(t)
		v, _ := s.view(t, id)
		if v.State != string(ledger.StateCompleted) || v.Receipt.DestinationIdentity != "noreply@"+domain || v.Receipt.ProviderRef == "" || sends.Load() != 1 {
			t.Fatalf("email delivery: %s %+v, sends %d", v.State, v.Receipt, sends.Load())
		}

		lost := s.submitDeliver(t, "em-2", `{"destination":"email","params":{"to":["dana@team.example.org"]},"payload":{"text":"Ships Tuesday."}}`)
		loseNext.Store(true)
		s.work(t)
		if got := s.task(t, lost); got.State != ledger.StateUnknown {
			t.Fatalf("after a lost SendEmail reply: %s; want unknown", got.State)
		}
		s.reconcile(t)
		got := s.task(t, lost)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome || sends.Load() != 2 {
			t.Fatalf("after the reconciler: %s %s, sends %d; want needs_review unknown_outcome and exactly 2 sends in all", got.State, got.ReviewReason, sends.Load())
		}
	})
}
