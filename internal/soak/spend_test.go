package soak

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The spend-control rules see what they promise to see: a small soak with
// three tasks of every kind runs, then budgets, the quota caller's 429s,
// cancels while running, admission waits and the provider's windows are
// tampered with before the check, and every tampering must show up as its
// violation.
func TestSpendCheckerCatchesBrokenPromises(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, "kumo")
	var tampered []string
	cfg := Config{N: 3 * len(TaskKinds()), Seed: 5, FaultShare: 1, NoBackground: true, NoBacklog: true, SubmitRate: -1, Mode: ModePlainReadback}
	cfg.beforeCheck = func(ctx context.Context, s *soak) {
		byKind := map[Kind][]*task{}
		for _, tk := range s.tasks {
			byKind[tk.kind] = append(byKind[tk.kind], tk)
		}
		set := func(id, attr string, v types.AttributeValue) {
			t.Helper()
			_, err := s.cleanDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(e.Names.TasksTable), Key: key(id), UpdateExpression: aws.String("SET #a = :v"),
				ExpressionAttributeNames:  map[string]string{"#a": attr},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": v},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

		// A budget overspent by far more than one reservation.
		bt := byKind[BudgetTight][0]
		btStored, err := s.clean.Get(ctx, bt.id)
		if err != nil {
			t.Fatal(err)
		}
		set(spend.BudgetItemKey(spend.ChainKeyOf(btStored)), "spent_output_tokens", numAttr(1_000_000))
		tampered = append(tampered, "spend_over_budget")

		// A 429 that wrote the task after all, and came without Retry-After.
		var refused *task
		for _, tk := range byKind[QuotaExceeded] {
			if _, ok := s.sp.retryAfter[tk.id]; ok {
				refused = tk
			}
		}
		if refused == nil {
			t.Fatalf("no quota caller was refused: %d quota tasks", len(byKind[QuotaExceeded]))
		}
		if _, err := s.cleanDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Names.TasksTable), Item: map[string]types.AttributeValue{
			"task_id": str(refused.id), "state": str(string(ledger.StateCompleted)),
		}}); err != nil {
			t.Fatal(err)
		}
		s.sp.retryAfter[refused.id] = ""
		tampered = append(tampered, "quota_429_wrote", "quota_429_without_retry_after")

		// Cancels while running: a call that started after the cancel, an
		// end outside the unknown rules, a cancelled task with a result.
		var cancelled []*task
		for _, tk := range byKind[CancelRunning] {
			if _, ok := s.sp.cancelAt[tk.id]; ok {
				cancelled = append(cancelled, tk)
			}
		}
		if len(cancelled) < 3 {
			t.Fatalf("only %d of %d cancel_running tasks were cancelled in flight", len(cancelled), len(byKind[CancelRunning]))
		}
		first := s.prov.Events(cancelled[0].id)[0].Start
		s.sp.cancelAt[cancelled[0].id] = first.Add(-time.Millisecond)
		s.sp.cancelAtt[cancelled[0].id] = 0 // as if the cancel had fenced an earlier attempt
		tampered = append(tampered, "call_after_cancel")
		set(cancelled[1].id, "state", str(string(ledger.StateFailed)))
		tampered = append(tampered, "cancel_not_by_unknown_rules")
		set(cancelled[2].id, "state", str(string(ledger.StateCancelled)))
		set(cancelled[2].id, "result", str(`{"text":"saved after the cancel"}`))
		tampered = append(tampered, "cancelled_with_result")

		// A wait for admission that consumed the claim's attempt.
		var waited *task
		for _, tk := range byKind[AdmissionWait] {
			if _, ok := s.sp.waitClaim[tk.id]; ok && s.sp.waited[tk.id] > 0 {
				waited = tk
			}
		}
		if waited == nil {
			t.Fatalf("no admission_wait task waited: %v", s.sp.waited)
		}
		s.sp.waitClaim[waited.id]--
		tampered = append(tampered, "admission_wait_consumed_attempt")

		// Provider calls made without admission: twice the window's limit
		// at once, so one window sees more than its limit.
		for i := range 2 * (AdmissionRequests + 1) {
			if _, err := s.prov.Generate(ctx, contract.Request{OperationID: fmt.Sprintf("unadmitted-%d", i), Input: []byte(`{"prompt":"x","max_tokens":1}`)}); err != nil {
				t.Fatalf("unadmitted call: %v", err)
			}
		}
		tampered = append(tampered, "admission_window_over_limit")
	}
	HoldSoakSlot(t)
	rep, err := Run(context.Background(), &Env{Backend: e.Backend, AWS: e.AWS, Names: e.Names}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, v := range rep.Violations {
		rules = append(rules, v.Rule)
	}
	for _, want := range tampered {
		if !slices.Contains(rules, want) {
			t.Errorf("tampering %q went unnoticed; violations: %v", want, rep.Violations)
		}
	}
	for _, v := range rep.Violations {
		if v.Kind != BudgetTight && v.Kind != QuotaExceeded && v.Kind != CancelRunning && v.Kind != AdmissionWait {
			t.Errorf("a violation no tampering explains: %s", v)
		}
	}
}
