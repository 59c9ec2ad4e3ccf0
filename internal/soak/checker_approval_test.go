package soak

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The approval rules (check_approval.go) are only worth their zero if they
// see broken promises: a small soak runs every kind twice, then the tables
// and the approver's recorded answers are tampered with, and every
// tampering must show up as its violation — and no approval rule may name
// a task that was not tampered with.
func TestCheckerCatchesBrokenApprovals(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, "kumo")
	tampered := map[string]bool{} // rules
	touched := map[string]bool{}  // tasks (parents and deliveries)
	cfg := Config{N: 2 * len(TaskKinds()), Seed: 5, FaultShare: 1, NoBackground: true, NoBacklog: true, SubmitRate: -1, Mode: ModePlainReadback}
	cfg.beforeCheck = func(ctx context.Context, s *soak) {
		tasks, err := s.scanTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]ledger.Task{}
		for _, tk := range tasks {
			stored[tk.TaskID] = tk
		}
		var approved, rejected []ledger.Task
		var stale ledger.Task
		for _, pt := range s.tasks {
			st, ok := stored[pt.id]
			if !ok || !isWorkflow(pt.kind) {
				continue
			}
			switch {
			case st.State == ledger.StateCompleted && st.ApprovalState == ledger.ApprovalApproved && len(st.WithdrawnDeliveryIDs) == 0:
				approved = append(approved, st)
			case st.State == ledger.StateRejected && pt.kind == WfStaleHash:
				stale = st
			case st.State == ledger.StateRejected:
				rejected = append(rejected, st)
			}
		}
		if len(approved) < 4 || len(rejected) < 1 || stale.TaskID == "" {
			t.Fatalf("the soak did not produce the workflow states to tamper with: %d approved, %d rejected, stale-hash task %q", len(approved), len(rejected), stale.TaskID)
		}
		put := func(d ledger.Task) {
			item, err := attributevalue.MarshalMap(d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.cleanDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.Names.TasksTable), Item: item}); err != nil {
				t.Fatal(err)
			}
			touched[d.TaskID] = true
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
			touched[id] = true
		}
		str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
		list := func(ids ...string) types.AttributeValue {
			l := &types.AttributeValueMemberL{}
			for _, id := range ids {
				l.Value = append(l.Value, str(id))
			}
			return l
		}
		call := func(id string, c decisionCall) {
			s.wf.calls[id] = append(s.wf.calls[id], c)
			touched[id] = true
		}
		delivery := func(parent ledger.Task, i int) ledger.Task {
			d, ok := stored[parent.DeliveryIDs[i]]
			if !ok {
				t.Fatalf("delivery %s of %s is not stored", parent.DeliveryIDs[i], parent.TaskID)
			}
			return d
		}
		// A fake delivery: a copy of a real one under another id.
		template := delivery(approved[0], 0)
		fake := func(parent ledger.Task, name, key string) ledger.Task {
			d := template
			d.TaskID, d.ParentTaskID, d.IdempotencyKey = ledger.TaskID(parent.Scope, name), parent.TaskID, key
			return d
		}

		a, b, w, x := approved[0], approved[1], approved[2], approved[3]
		// A delivery of an approval lost: fewer deliveries than the plan.
		if _, err := s.cleanDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(e.Names.TasksTable), Key: key(a.DeliveryIDs[0])}); err != nil {
			t.Fatal(err)
		}
		touched[a.TaskID], touched[a.DeliveryIDs[0]] = true, true
		tampered["delivery_count"] = true
		// A delivery keyed for another artifact, and one carrying another
		// payload, and one still live.
		set(delivery(b, 0).TaskID, "idempotency_key", str(ledger.DeliveryKey(b.TaskID, ledger.SHA256Hex("other"), 0, 0)))
		tampered["delivery_key_mismatch"] = true
		set(delivery(x, 0).TaskID, "input", str(`{"destination":"notify","params":{},"payload":{"text":"not what was approved"}}`))
		tampered["delivery_payload_not_approved"] = true
		set(delivery(x, 0).TaskID, "state", str(string(ledger.StateQueued)))
		tampered["delivery_not_final"] = true
		// An approved task whose approval is pending again, deliveries
		// standing.
		set(w.TaskID, "approval_state", str(ledger.ApprovalPending))
		for _, id := range w.DeliveryIDs {
			touched[id] = true
		}
		tampered["delivery_of_unapproved"], tampered["approve_200_not_approved"] = true, true
		// A rejected task with a delivery, whose approve lost to the reject.
		r := rejected[0]
		onR := fake(r, "soak-tamper-r", ledger.DeliveryKey(r.TaskID, r.ResultSHA256, 0, 0))
		put(onR)
		set(r.TaskID, "delivery_ids", list(onR.TaskID))
		call(r.TaskID, decisionCall{verb: "approve", variant: "z", status: 409, problem: "state-conflict"})
		tampered["delivery_of_rejected"], tampered["race_lost_to_reject_has_deliveries"] = true, true
		// A delivery of a withdrawn approval that ran, though the withdraw
		// was refused.
		ran := fake(a, "soak-tamper-w", ledger.DeliveryKey(a.TaskID, a.ResultSHA256, 0, 0))
		ran.State, ran.AssignmentVersion = ledger.StateFailed, 1
		put(ran)
		set(a.TaskID, "withdrawn_delivery_ids", list(ran.TaskID))
		call(a.TaskID, decisionCall{verb: "withdraw", variant: "z", status: 409, problem: "deliveries-started"})
		tampered["withdrawn_delivery_started"], tampered["withdraw_refused_but_withdrawn"] = true, true
		tampered["approve_deliveries_differ"] = true // a's answer named no withdrawn delivery
		// A delivery that belongs to no approval, and one of no task of
		// the run.
		put(fake(b, "soak-tamper-n", ledger.DeliveryKey(b.TaskID, b.ResultSHA256, 7, 0)))
		tampered["delivery_not_of_an_approval"] = true
		orphan := fake(b, "soak-tamper-o", "approval:nobody")
		orphan.ParentTaskID = ledger.TaskID("nobody", "nothing")
		put(orphan)
		tampered["delivery_without_parent"] = true
		// The stale hash answered 200, and a delivery keyed with it.
		var staleSHA string
		for i, c := range s.wf.calls[stale.TaskID] {
			if c.variant == "stale" {
				s.wf.calls[stale.TaskID][i].status, s.wf.calls[stale.TaskID][i].problem = 200, ""
				staleSHA = c.sha
			}
		}
		if staleSHA == "" {
			t.Fatal("the stale-hash task has no stale approve call")
		}
		touched[stale.TaskID] = true
		put(fake(stale, "soak-tamper-s", ledger.DeliveryKey(stale.TaskID, staleSHA, 0, 0)))
		tampered["stale_hash_not_refused"], tampered["stale_hash_delivery"] = true, true
		// Answers the final states contradict.
		call(x.TaskID, decisionCall{verb: "reject", variant: "z", status: 200})
		tampered["reject_200_not_rejected"], tampered["approve_and_reject_both_won"] = true, true
		call(b.TaskID, decisionCall{verb: "withdraw", variant: "z", status: 200})
		tampered["withdrawn_but_not_recorded"] = true
		call(b.TaskID, decisionCall{verb: "approve", variant: "z", status: 503})
		tampered["unexpected_decision_status"] = true
	}
	HoldSoakSlot(t)
	rep, err := Run(context.Background(), &Env{Backend: e.Backend, AWS: e.AWS, Names: e.Names}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	approvalRules := map[string]bool{}
	for r := range tampered {
		approvalRules[r] = true
	}
	var got []string
	for _, v := range rep.Violations {
		got = append(got, v.Rule)
		if approvalRules[v.Rule] && !touched[v.TaskID] {
			t.Errorf("approval rule fired on a task that was not tampered with: %s", v)
		}
	}
	for r := range tampered {
		if !slices.Contains(got, r) {
			t.Errorf("tampering %q went unnoticed; violations: %v", r, rep.Violations)
		}
	}
}
