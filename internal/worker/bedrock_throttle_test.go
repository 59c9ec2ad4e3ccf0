package worker_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

const throttledBedrockModel = "anthropic.claude-throttle-test"

// throttlingBedrock is the real Bedrock adapter (the real SDK client)
// against a local endpoint that answers every Converse with Bedrock's own
// throttle: HTTP 429, ThrottlingException — turned away, not performed.
func throttlingBedrock(t *testing.T) (*bedrock.Provider, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Requestid", "req-k-0001")
		w.Header().Set("X-Amzn-Errortype", "ThrottlingException")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"message":"Too many requests, please wait before trying again."}`)
	}))
	t.Cleanup(srv.Close)
	p, err := bedrock.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI", ""),
		RetryMaxAttempts: 1,
		BaseEndpoint:     aws.String(srv.URL),
	}, bedrock.Options{Model: throttledBedrockModel})
	if err != nil {
		t.Fatal(err)
	}
	return p, &calls
}

// TestBedrockThrottleIsADefiniteRefusal: "only a refusal in so many words
// (definiteRefusal: never sent, 4xx, throttled) settles an assignment the
// reconciler got to first". The real Bedrock adapter steers
// ThrottlingException with retrypolicy.Throttled, whose classification
// reason is "steered_transient", and its chain carries the SDK's
// *awshttp.ResponseError, not a retrypolicy.StatusError — so recognising a
// throttle only by Classification.Throttle() (reason "http_429" or
// "aws_<throttle code>") or a 4xx *retrypolicy.StatusError would treat
// Bedrock's own throttle, the commonest refusal of the one production LLM
// provider, as "sent, may have generated". The simulated provider's
// throttle carries a StatusError 429, so this test uses the real adapter
// (TestRefusalAfterTheLeaseLapsedIsRecorded and the cancel tests cover the
// simulated one).
//
//	lapsed: claim (v), call: 429 ThrottlingException (nothing performed);
//	        the reconciler expires the slow worker's lease (unknown at v)
//	        before its write → the worker's ScheduleRetry settles it:
//	        retry_wait, as with the simulated 429 — not parked
//	        unknown_outcome "whether bedrock performed (and billed)".
//	cancel: a cancel while running lands before the write → ended
//	        cancelled as "refused, did not act", not parked
//	        unknown_outcome by the reconciler's cancel rule.
//	spend:  (no lapse) the throttled call of a budgeted task is charged
//	        nothing (usedBy: "a definite refusal (throttled …) is charged
//	        nothing"), not its full reservation — else every Bedrock
//	        throttle would burn the budget and the caller's quota as if the
//	        model had generated, until the task parks budget_exhausted for
//	        spend that never happened (DESIGN §1.5, §13).
func TestBedrockThrottleIsADefiniteRefusal(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"lapsed", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			testenv.Each(t, func(t *testing.T, e *testenv.Env) {
				b := setup(t, e)
				ctx := context.Background()
				p, calls := throttlingBedrock(t)
				b.h.Provider = p
				task := b.create(t, "bedrock-throttle-"+mode, prompt)
				raced := raceTheSave(t, b, task.TaskID, mode)
				b.send(t, task.TaskID)
				handle(t, b.h, ctx, b.deliver(t, 1, 120))
				raced()
				if n := calls.Load(); n != 1 {
					t.Fatalf("setup: %d Converse calls; want 1 (throttled)", n)
				}
				wantRefusalSettled(t, b, task.TaskID, mode, func() { b.reconcile(t, p) },
					"Bedrock answered 429 ThrottlingException (turned away, not performed), as for the simulated provider's 429")
			})
		})
	}
	t.Run("spend", func(t *testing.T) {
		testenv.Each(t, func(t *testing.T, e *testenv.Env) {
			b := setup(t, e)
			p, calls := throttlingBedrock(t)
			b.h.Provider = p
			withPrices(t, b, e.DDB, nil, spendDocFor(throttledBedrockModel))
			task := b.create(t, "bedrock-throttle-spend", budgetedPrompt, budget(10_000, nil))
			b.send(t, task.TaskID)
			handle(t, b.h, context.Background(), b.deliver(t, 1, 60)) // a retry is an item failure
			if n := calls.Load(); n != 1 {
				t.Fatalf("setup: %d Converse calls; want 1 (throttled)", n)
			}
			got := b.get(t, task.TaskID)
			s := spendState(t, b, spend.ChainKeyOf(task))
			if s.Spent.Tokens() != 0 || s.Spent.Cost != 0 {
				t.Fatalf("Bedrock throttled the call (429 ThrottlingException: nothing generated, nothing billed); task %s (%s), yet the budget records %d tokens ($%s) spent — the full reservation, as for a call that may have generated",
					got.State, got.ErrorClass, s.Spent.Tokens(), s.Spent.Cost)
			}
		})
	})
}
