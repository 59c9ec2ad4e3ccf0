package followup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestParseRefusesWhatCannotBeSent(t *testing.T) {
	for name, cfg := range map[string]string{
		"no origin":           `{"approvers":{"email":["a@example.com"]}}`,
		"origin with a path":  `{"page_origin":"https://x.example.com/app","requester":{"email":true}}`,
		"approvers with none": `{"page_origin":"https://x.example.com","approvers":{}}`,
		"requester with none": `{"page_origin":"https://x.example.com","requester":{}}`,
		"not an address":      `{"page_origin":"https://x.example.com","approvers":{"email":["bob"]}}`,
		"unknown field":       `{"page_origin":"https://x.example.com","requester":{"email":true},"cc":[]}`,
	} {
		if _, err := followup.Parse(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if c, err := followup.Parse(""); c != nil || err != nil {
		t.Errorf(`Parse("") = %v, %v; want nobody notified`, c, err)
	}
}

func task(mods ...func(*ledger.Task)) *ledger.Task {
	t := &ledger.Task{TaskID: "t_1", Scope: "jwt:alice", Kind: "generate", AssignmentVersion: 2, CorrelationID: "c", RequesterEmail: "alice@example.com"}
	for _, m := range mods {
		m(t)
	}
	return t
}

func TestCompletionFollowUps(t *testing.T) {
	c, err := followup.Parse(`{"page_origin":"https://x.example.com/","approvers":{"sns_topic":"approvals"},"requester":{"email":true}}`)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody configured and no plan: nothing at all.
	if fu, err := (*followup.Config)(nil).Completion(task(), `{"text":"hi"}`); fu != nil || err != nil {
		t.Fatalf("nil config, no plan: %v, %v", fu, err)
	}
	// A plan without approval: its deliveries and the requester's notification.
	planned := task(func(x *ledger.Task) { x.Plan = `{"deliver":[{"destination":"crm","params":{"k":1}}]}` })
	fu, err := c.Completion(planned, `{"text":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	done := fu[ledger.StateCompleted]
	if len(done) != 2 || done[0].IdempotencyKey != ledger.DeliveryKey("t_1", ledger.SHA256Hex(`{"text":"hi"}`), 0, 0) ||
		done[0].Input != `{"destination":"crm","params":{"k":1},"payload":{"text":"hi"}}` || done[0].ParentTaskID != "t_1" ||
		done[1].IdempotencyKey != "notify:t_1:completed:2:email" || !strings.Contains(done[1].Input, "https://x.example.com/#task=t_1") {
		t.Fatalf("completed follow-ups %+v", done)
	}
	if len(fu[ledger.StateAwaitingApproval]) != 0 {
		t.Fatalf("an ungated task notifies approvers: %+v", fu[ledger.StateAwaitingApproval])
	}
	// A gated task: the approvers' notification for awaiting_approval.
	gated := task(func(x *ledger.Task) { x.ApprovalRequired = true })
	if fu, _ = c.Completion(gated, `{}`); len(fu[ledger.StateAwaitingApproval]) != 1 || !strings.Contains(fu[ledger.StateAwaitingApproval][0].Input, `"topic":"approvals"`) {
		t.Fatalf("gated follow-ups %+v", fu)
	}
	// A result the plan cannot deliver.
	var nd *followup.NotDeliverableError
	if _, err := c.Completion(planned, `"a string"`); !errors.As(err, &nd) || nd.Index != 0 {
		t.Fatalf("a string result: %v, want NotDeliverableError for deliver[0]", err)
	}
	// A notification's own outcome is never notified.
	n := done[1]
	own := task(func(x *ledger.Task) {
		x.Kind, x.IdempotencyKey, x.Provenance = ledger.KindDeliver, n.IdempotencyKey, n.Provenance
	})
	if got := c.Failed(own); got != nil {
		t.Fatalf("a failed notification notifies: %+v", got)
	}
	// A park's key counts parks.
	if p := c.Parked(task(func(x *ledger.Task) { x.ParkCount = 1 })); len(p) != 1 || p[0].IdempotencyKey != "notify:t_1:parked:2:email" {
		t.Fatalf("second park's notification %+v", p)
	}
}
