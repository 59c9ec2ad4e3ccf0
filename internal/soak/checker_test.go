package soak

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The checker is only worth its zero if it sees broken promises: a small
// soak runs, then the tables are tampered with before the check, and every
// tampering must show up as its violation.
func TestCheckerCatchesBrokenPromises(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, "kumo")
	var tampered []string
	cfg := Config{N: len(TaskKinds()), Seed: 3, FaultShare: 1, NoBackground: true, NoBacklog: true, SubmitRate: -1, Mode: ModePlainReadback}
	cfg.beforeCheck = func(ctx context.Context, s *soak) {
		tasks, err := s.scanTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byState := map[ledger.State][]ledger.Task{}
		for _, tk := range tasks {
			// The workflow kinds and their deliveries have their own
			// tamperings (checker_approval_test.go).
			if pt := s.byID[tk.TaskID]; pt != nil && !isWorkflow(pt.kind) && !isDeliver(pt.kind) {
				byState[tk.State] = append(byState[tk.State], tk)
			}
		}
		failed, parked := byState[ledger.StateFailed], byState[ledger.StateNeedsReview]
		// Completed tasks with inline payloads for the classic tamperings;
		// one whose result went through the S3 claim-check for its own.
		var completed, offloaded []ledger.Task
		for _, tk := range byState[ledger.StateCompleted] {
			switch {
			case tk.ResultRef != nil:
				offloaded = append(offloaded, tk)
			case tk.InputRef == nil && tk.ReadbackAt == "" && s.byID[tk.TaskID] != nil && !isDeliver(s.byID[tk.TaskID].kind) && !isDocument(s.byID[tk.TaskID].kind) &&
				!isNotify(s.byID[tk.TaskID].kind) && !isStream(s.byID[tk.TaskID].kind):
				// (Deliver, document, notified and streamed tasks have
				// rules of their own — check_deliver.go, check_document.go,
				// followup.go, stream.go — that a tampering of them breaks
				// too.)
				completed = append(completed, tk)
			}
		}
		if len(completed) < 7 || len(offloaded) < 1 || len(failed) < 1 || len(parked) < 2 || len(s.poison) < 1 {
			t.Fatalf("the soak did not produce the states to tamper with: %d completed, %d with an offloaded result, %d failed, %d parked, %d poison",
				len(completed), len(offloaded), len(failed), len(parked), len(s.poison))
		}
		set := func(id, attr string, v types.AttributeValue) {
			_, err := s.cleanDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(e.Names.TasksTable), Key: key(id), UpdateExpression: aws.String("SET #a = :v"),
				ExpressionAttributeNames:  map[string]string{"#a": attr},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": v},
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// A task back in a live state (lost on the way to a final one).
		set(completed[0].TaskID, "state", &types.AttributeValueMemberS{Value: "queued"})
		tampered = append(tampered, "not_final")
		// A result silently replaced.
		set(completed[1].TaskID, "result", &types.AttributeValueMemberS{Value: `{"text":"not the provider's"}`})
		tampered = append(tampered, "result_not_the_providers")
		// A second save seen at the SDK.
		s.saves[completed[2].TaskID]++
		tampered = append(tampered, "two_saved_results")
		// Attempts above the budget.
		set(failed[0].TaskID, "attempts", &types.AttributeValueMemberN{Value: "9"})
		tampered = append(tampered, "attempts_over_budget")
		// A parked task without its review item, and an orphan review item.
		del := func(id string) {
			if _, err := s.cleanDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.Names.ReviewTable), Key: key(id)}); err != nil {
				t.Fatal(err)
			}
		}
		del(parked[0].TaskID)
		tampered = append(tampered, "parked_without_review")
		orphan, _ := attributevalue.MarshalMap(ledger.Review{TaskID: ledger.TaskID("nobody", "nothing"), ReviewStatus: ledger.ReviewOpen, Reason: ledger.ReviewBudgetExhausted, DeadLetteredAt: "2026-01-01T00:00:00Z"})
		if _, err := s.cleanDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Names.ReviewTable), Item: orphan}); err != nil {
			t.Fatal(err)
		}
		tampered = append(tampered, "review_without_task")
		// A poison message that was never recorded.
		del(ledger.PoisonID(s.poison[0].id))
		tampered = append(tampered, "poison_not_recorded")
		// A caller left with a 503 for a stored task.
		rec := s.records[completed[3].TaskID]
		rec.finals["z"] = call{variant: "z", status: 503}
		tampered = append(tampered, "stored_but_caller_left_with_5xx")

		// The unforgiving path. The provider (no idempotency) called again
		// for a completed task, without a readback: a recall after an
		// uncertain outcome, and a second side effect.
		again := completed[4]
		if _, err := s.prov.Generate(ctx, contract.Request{OperationID: again.TaskID, Kind: again.Kind, Input: json.RawMessage(again.Input)}); err != nil {
			t.Fatal(err)
		}
		tampered = append(tampered, "recall_after_uncertain", "duplicate_side_effect")
		// A completed task whose worker said its result was discarded.
		s.onWatched(discardedLog, completed[5].TaskID, completed[5].AssignmentVersion, completed[5].AssignmentVersion, 0)
		tampered = append(tampered, "saved_result_reported_discarded")
		// A task whose replayed schedule-retry the worker reported as
		// rejected (and so acknowledged the record carrying the retry).
		s.retryPending[completed[7].TaskID] = true
		s.onWatched(retryFencedLog, completed[7].TaskID, completed[7].AssignmentVersion, completed[7].AssignmentVersion, 0)
		tampered = append(tampered, "scheduled_retry_acknowledged")
		// A call cut short by the invocation's deadline.
		s.cut[completed[6].TaskID]++
		tampered = append(tampered, "call_cut_by_deadline")
		// A parked task whose review says result_too_large, without an
		// oversized result.
		var notTooLarge ledger.Task
		for _, p := range parked[1:] { // parked[0] lost its review above
			if p.ReviewReason != reasonResultTooLarge && !s.oversized(p.TaskID) && s.byID[p.TaskID] != nil && !isDeliver(s.byID[p.TaskID].kind) {
				notTooLarge = p
				break
			}
		}
		if notTooLarge.TaskID == "" {
			t.Fatal("no parked task without an oversized result to tamper with")
		}
		if _, err := s.cleanDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(e.Names.ReviewTable), Key: key(notTooLarge.TaskID), UpdateExpression: aws.String("SET #r = :r"),
			ExpressionAttributeNames:  map[string]string{"#r": "reason"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: reasonResultTooLarge}},
		}); err != nil {
			t.Fatal(err)
		}
		tampered = append(tampered, "result_too_large_without_oversize")
		// The claim-check: the item pointed at another assignment's result
		// object (one that was never written): not the winner's, not
		// readable (and so not the provider's result either).
		o := offloaded[0]
		ref := *o.ResultRef
		ref.Key = payload.ResultKey(o.TaskID, o.CreatedMs, o.AssignmentVersion+1)
		av, _ := attributevalue.Marshal(ref)
		set(o.TaskID, "result_ref", av)
		tampered = append(tampered, "result_ref_not_winner", "result_ref_unreadable")
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
			t.Errorf("tampering %q went unnoticed; violations: %v", want, rules)
		}
	}
	// Three tamperings break one rule more each: the task put back to
	// queued still carries a result, a completed task with two saves has
	// not exactly one, and a result reference to a missing object is not
	// the provider's result either.
	if got, want := len(rep.Violations), len(tampered)+3; got > want {
		t.Errorf("more violations than tamperings (%d > %d): %v", got, want, rep.Violations)
	}
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}}
}
