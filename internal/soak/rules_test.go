package soak

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestRecallAfterUncertain(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	call := func(s int, o simulated.Outcome) simulated.Event {
		return simulated.Event{Kind: simulated.EventCall, Start: at(s), Outcome: o}
	}
	lookup := func(s int, o simulated.Outcome) simulated.Event {
		return simulated.Event{Kind: simulated.EventLookup, Start: at(s), Outcome: o}
	}
	cases := []struct {
		name  string
		evs   []simulated.Event
		since time.Time
		want  int
	}{
		{"one call", []simulated.Event{call(0, simulated.OutcomePerformed)}, time.Time{}, 0},
		{"after rejections", []simulated.Event{call(0, simulated.OutcomeRejected), call(1, simulated.OutcomeRejected), call(2, simulated.OutcomePerformed)}, time.Time{}, 0},
		{"after a lost reply", []simulated.Event{call(0, simulated.OutcomeLostReply), call(1, simulated.OutcomePerformed)}, time.Time{}, 1},
		{"after an interrupted call", []simulated.Event{call(0, simulated.OutcomeInterrupted), call(1, simulated.OutcomePerformed)}, time.Time{}, 1},
		{"after a delivered reply", []simulated.Event{call(0, simulated.OutcomePerformed), call(1, simulated.OutcomePerformed)}, time.Time{}, 1},
		{"concurrent", []simulated.Event{call(0, simulated.OutcomeInFlight), call(1, simulated.OutcomePerformed)}, time.Time{}, 1},
		{"readback proved absence", []simulated.Event{call(0, simulated.OutcomeInterrupted), lookup(1, simulated.OutcomeNotFound), call(2, simulated.OutcomePerformed)}, time.Time{}, 0},
		{"readback without an answer", []simulated.Event{call(0, simulated.OutcomeInterrupted), lookup(1, simulated.OutcomeNoReadback), call(2, simulated.OutcomePerformed)}, time.Time{}, 1},
		{"readback found it", []simulated.Event{call(0, simulated.OutcomeLostReply), lookup(1, simulated.OutcomeFound), call(2, simulated.OutcomePerformed)}, time.Time{}, 1},
		{"an earlier generation", []simulated.Event{call(0, simulated.OutcomePerformed), call(5, simulated.OutcomePerformed)}, at(4), 0},
	}
	for _, c := range cases {
		if n, why := recallAfterUncertain(c.evs, c.since); n != c.want || (n > 0) != (why != "") {
			t.Errorf("%s: %d recalls (%q), want %d", c.name, n, why, c.want)
		}
	}
}

func TestFalseUncertainty(t *testing.T) {
	t.Parallel()
	parked := &ledger.Task{State: ledger.StateNeedsReview, ReviewReason: ledger.ReviewUnknownOutcome}
	mayHave := &ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "Task t ran out of attempts, and its last attempt may have reached the provider"}
	plain := &ledger.Review{Reason: ledger.ReviewBudgetExhausted, Summary: "Task t ran out of attempts: every attempt was throttled"}
	cases := []struct {
		name   string
		starts int
		st     *ledger.Task
		r      *ledger.Review
		want   bool
	}{
		{"unknown_outcome without a call", 0, parked, nil, true},
		{"unknown_outcome after a call", 1, parked, nil, false},
		{"review saying may have, without a call", 0, &ledger.Task{State: ledger.StateNeedsReview}, mayHave, true},
		{"review saying may have, after a call", 2, &ledger.Task{State: ledger.StateNeedsReview}, mayHave, false},
		{"a certain review without a call", 0, &ledger.Task{State: ledger.StateNeedsReview}, plain, false},
	}
	for _, c := range cases {
		if why, kind := falseUncertainty(c.starts, c.st, c.r); (kind == uncertainFalse) != c.want || (why != "") != c.want {
			t.Errorf("%s: false uncertainty %v (%q), want %t", c.name, kind, why, c.want)
		}
	}
}

// TestMarkedCallNeverStartedIsGenuineUncertaintyOnlyWhenTheReviewSaysSo:
// the parked attempt's call-start mark, with no call started, is the one
// uncertainty the system cannot resolve (the worker stopped between the
// mark and the call); it is not false — if the review says whether the
// call was sent cannot be known — and an earlier attempt's mark is no
// excuse.
func TestMarkedCallNeverStartedIsGenuineUncertaintyOnlyWhenTheReviewSaysSo(t *testing.T) {
	t.Parallel()
	marked := &ledger.Task{State: ledger.StateNeedsReview, ReviewReason: ledger.ReviewUnknownOutcome, AssignmentVersion: 3, CallStartedVersion: 3}
	says := &ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "Task t: the provider may have produced a result.",
		Known: []string{"whether the call reached simulated cannot be known"}}
	silent := &ledger.Review{Reason: ledger.ReviewUnknownOutcome, Summary: "Task t: the provider may have produced a result."}
	if _, kind := falseUncertainty(0, marked, says); kind != uncertainGenuine {
		t.Errorf("marked, never called, review says so: %v, want genuine", kind)
	}
	if _, kind := falseUncertainty(0, marked, silent); kind != uncertainFalse {
		t.Errorf("marked, never called, review silent about it: %v, want false", kind)
	}
	earlier := *marked
	earlier.CallStartedVersion = 2
	if _, kind := falseUncertainty(0, &earlier, says); kind != uncertainFalse {
		t.Errorf("an earlier attempt's mark: %v, want false", kind)
	}
	if _, kind := falseUncertainty(1, marked, silent); kind != uncertainCalled {
		t.Errorf("a call started: %v, want called", kind)
	}
}

func TestNewState(t *testing.T) {
	t.Parallel()
	in := &dynamodb.UpdateItemInput{
		UpdateExpression:         aws.String("SET #state = :state, #v = #v + :one REMOVE #x"),
		ExpressionAttributeNames: map[string]string{"#state": "state", "#v": "assignment_version", "#x": "not_before"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":state": &types.AttributeValueMemberS{Value: "running"}, ":one": &types.AttributeValueMemberN{Value: "1"},
		},
	}
	if got := newState(in); got != "running" {
		t.Errorf("newState = %q, want running", got)
	}
	in.UpdateExpression = aws.String("SET #v = #v + :one")
	if got := newState(in); got != "" {
		t.Errorf("newState of an update that sets no state = %q", got)
	}
}

// The plan's rate: at N=1000 (the default half faulted) each document kind
// is planned at least 20 times; at N=10,000 every task kind is.
func TestPlanDocumentRate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n     int
		kinds []Kind
	}{{1000, []Kind{Document, DocumentAltered}}, {10000, TaskKinds()}} {
		count := map[Kind]int{}
		for _, tk := range plan(c.n, Config{}.withDefaults().FaultShare, 1, Scope) {
			count[tk.kind]++
		}
		for _, k := range c.kinds {
			if count[k] < 20 {
				t.Errorf("N=%d: %s planned %d times, want ≥ 20", c.n, k, count[k])
			}
		}
	}
}

// Every admission_wait task's input is one the submit accepts (its output
// bound under the cap; at N=10,000 it once was not: 63 submits answered
// 400) and its admission estimate its own (fullWindows tells its admit by
// it), at the largest N the soak is run with.
func TestPlanAdmissionWaitInputs(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for _, tk := range plan(10000, Config{}.withDefaults().FaultShare, 1, Scope) {
		if isDeliver(tk.kind) {
			continue
		}
		in, err := contract.ParseGenerateInput(json.RawMessage(tk.input))
		if err != nil {
			t.Fatalf("%s %s: input %s refused: %v", tk.kind, tk.id, tk.input, err)
		}
		if tk.kind != AdmissionWait {
			if in.MaxTokens >= admissionWaitMaxTokens {
				t.Errorf("%s %s: output bound %d is in admission_wait's range", tk.kind, tk.id, in.MaxTokens)
			}
			continue
		}
		if seen[in.MaxTokens] {
			t.Errorf("admission_wait %s: output bound %d is another admission_wait task's", tk.id, in.MaxTokens)
		}
		seen[in.MaxTokens] = true
	}
	if len(seen) < 20 {
		t.Errorf("%d admission_wait tasks planned, want ≥ 20", len(seen))
	}
}
