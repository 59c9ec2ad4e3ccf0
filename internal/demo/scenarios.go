package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
)

// Scenario is one seed workflow.
type Scenario struct {
	ID, Title string
	Run       func(ctx context.Context, t *Target) (*Result, error)
}

// Result is what a scenario did: one case per generate task, each with its
// final view and its deliveries' final views, and the checks that held.
type Result struct {
	ID, Title string
	Cases     []*Case
}

// Case is one generate task of a scenario.
type Case struct {
	Label      string
	Task       *TaskView
	Deliveries []*TaskView
	// Effects is, per delivery id, the side effects the destination itself
	// recorded (what it saw, not what the API says).
	Effects map[string]int
	Checks  []string
}

// Scenarios returns the seed scenarios in order: 000, 001, 004, then 015
// (the people around the work, people.go).
func Scenarios() []Scenario {
	return []Scenario{
		{ID: "000", Title: "document review: one notification after approval, its reply lost", Run: documentReview},
		{ID: "001", Title: "publishing: approved, published, read back from the public URL after a delay", Run: publishing},
		{ID: "004", Title: "CRM follow-up: an unknown outcome resolved by lookup; an approval withdrawn before execution", Run: crmFollowUp},
		{ID: "015", Title: "requester and approver: GET /tasks, GET /approvals, approve; a lambda delivery's receipt; the approver's email", Run: people},
	}
}

func scenarioTitle(id string) string {
	for _, s := range Scenarios() {
		if s.ID == id {
			return s.Title
		}
	}
	return ""
}

// Failures collects a case's failed checks.
type Failures []string

func (f Failures) Error() string { return strings.Join(f, "; ") }

type checker struct {
	c    *Case
	fail Failures
}

func (k *checker) check(ok bool, what string, args ...any) {
	s := fmt.Sprintf(what, args...)
	if ok {
		k.c.Checks = append(k.c.Checks, s)
	} else {
		k.fail = append(k.fail, s)
	}
}

func (k *checker) err() error {
	if len(k.fail) == 0 {
		return nil
	}
	return k.fail
}

type planned struct {
	destination string
	params      map[string]any
}

// gated submits a generate task with an approval gate and plan, and waits
// for it to await approval.
func gated(ctx context.Context, t *Target, c *client, key, prompt string, plan []planned) (*TaskView, error) {
	var deliver []map[string]any
	for _, p := range plan {
		deliver = append(deliver, map[string]any{"destination": p.destination, "params": p.params})
	}
	id, err := c.submit(ctx, key, map[string]any{
		"kind":     "generate",
		"input":    map[string]any{"prompt": prompt},
		"approval": map[string]any{"required": true, "expires_in_seconds": 3600},
		"deliver":  deliver,
	})
	if err != nil {
		return nil, err
	}
	t.say("submitted generate task %s (Idempotency-Key %s), approval required, deliver to %s", id, key, destNames(plan))
	v, err := c.await(ctx, id, "awaiting_approval")
	if err != nil {
		return nil, err
	}
	t.say("generated; awaiting approval of result_sha256 %s", short(v.ResultSHA256))
	return v, nil
}

// approve approves v's exact result hash and returns the view.
func approve(ctx context.Context, t *Target, c *client, v *TaskView, note string) (*TaskView, error) {
	if v.ResultSHA256 == "" {
		return nil, fmt.Errorf("task %s awaits approval but shows no result_sha256", v.TaskID)
	}
	var out TaskView
	if err := c.expect(ctx, http.StatusOK, http.MethodPost, "/tasks/"+v.TaskID+"/approve", "",
		map[string]any{"artifact_sha256": v.ResultSHA256, "note": note}, &out); err != nil {
		return nil, err
	}
	t.say("approved artifact %s: state %s, %d deliver task(s) created", short(v.ResultSHA256), out.State, len(out.Deliveries))
	return &out, nil
}

// settle waits for every delivery of the approved task a to complete and
// returns the final views of the task and its deliveries.
func settle(ctx context.Context, t *Target, c *client, a *TaskView) (*TaskView, []*TaskView, error) {
	var ds []*TaskView
	for _, d := range a.Deliveries {
		v, err := c.watch(ctx, d.TaskID, func(v *TaskView) {
			note := ""
			if v.State == "unknown" {
				note = " — the destination may have acted (its reply was lost): never re-sent, the reconciler reads it back"
			}
			t.say("delivery %s → %s: %s%s", d.TaskID, d.Destination, v.State, note)
		}, "completed")
		if err != nil {
			return nil, nil, err
		}
		t.say("delivery %s completed: readback %s at %s", d.TaskID, v.Receipt.ReadbackResult, v.Receipt.ReadbackAt)
		ds = append(ds, v)
	}
	final, err := c.get(ctx, a.TaskID)
	return final, ds, err
}

// checkApproved checks an approved case: the task, its approval, and for
// each delivery its receipt against the approval and against what the
// destination itself recorded.
func checkApproved(k *checker, t *Target, approvedSHA string, plan []planned, readback string) {
	c := k.c
	v := c.Task
	k.check(v.State == "completed", "task %s is completed (got %s)", v.TaskID, v.State)
	a := v.Approval
	k.check(a != nil && a.State == "approved", "approval state approved")
	if a == nil {
		return
	}
	k.check(a.ArtifactSHA256 == approvedSHA, "approval.artifact_sha256 = the hash approved (%s)", short(approvedSHA))
	k.check(a.DecidedBy != "" && a.DecidedAt != "" && a.Policy != "", "approval names decided_by, decided_at, policy (%q, %q, %q)", a.DecidedBy, a.DecidedAt, a.Policy)
	k.check(len(c.Deliveries) == len(plan) && len(v.Deliveries) == len(plan), "%d delivery per plan entry (got %d)", len(plan), len(c.Deliveries))
	c.Effects = map[string]int{}
	for i, d := range c.Deliveries {
		if i >= len(plan) {
			break
		}
		p := plan[i]
		r := d.Receipt
		sim := t.Sims[p.destination]
		k.check(d.State == "completed" && d.ParentTaskID == v.TaskID, "delivery %s completed, parent %s", d.TaskID, v.TaskID)
		k.check(r.OperationID == d.TaskID, "receipt.operation_id = the deliver task id")
		k.check(r.Destination == p.destination && r.DestinationIdentity == "simulated:"+p.destination, "receipt.destination %s, destination_identity simulated:%s", p.destination, p.destination)
		k.check(r.PayloadSHA256 == approvedSHA, "receipt.payload_sha256 = the approved artifact (got %s)", short(r.PayloadSHA256))
		k.check(r.ProviderRef != "", "receipt.provider_ref (the destination's id) is set")
		k.check(r.ReadbackAt != "" && r.ReadbackResult == readback, "receipt.readback_result %s with readback_at (got %q at %q)", readback, r.ReadbackResult, r.ReadbackAt)
		k.check(r.ApprovedBy == a.DecidedBy && r.ApprovedAt == a.DecidedAt && r.Policy == a.Policy, "receipt.approved_by/approved_at/policy = the approval's")
		if sim == nil {
			k.check(false, "destination %s is a simulated one the demo can count", p.destination)
			continue
		}
		n, calls := sim.SideEffects(d.TaskID), sim.Calls(d.TaskID)
		c.Effects[d.TaskID] = n
		k.check(n == 1, "%s saw exactly one side effect for operation %s (got %d)", p.destination, d.TaskID, n)
		k.check(calls == 1, "%s was called once: never re-sent after the lost reply (got %d)", p.destination, calls)
	}
}

func documentReview(ctx context.Context, t *Target) (*Result, error) {
	res := &Result{ID: "000", Title: Scenarios()[0].Title}
	c := t.client()
	plan := []planned{{dsim.Notify, map[string]any{"to": "requester@example.com"}}}
	notify := t.Sims[dsim.Notify]
	before := 0
	if notify != nil {
		before = notify.TotalSideEffects()
	}
	v, err := gated(ctx, t, c, "seed-000-"+t.run(), "Summarise the attached contract for the requester.", plan)
	if err != nil {
		return res, err
	}
	a, err := approve(ctx, t, c, v, "summary checked against the document")
	if err != nil {
		return res, err
	}
	cs := &Case{Label: "approved, notified once"}
	res.Cases = append(res.Cases, cs)
	if cs.Task, cs.Deliveries, err = settle(ctx, t, c, a); err != nil {
		return res, err
	}
	k := &checker{c: cs}
	checkApproved(k, t, v.ResultSHA256, plan, "found")
	if notify != nil {
		n := notify.TotalSideEffects() - before
		k.check(n == 1, "the notify destination saw exactly one notification in this scenario (got %d)", n)
	}
	return res, k.err()
}

func publishing(ctx context.Context, t *Target) (*Result, error) {
	res := &Result{ID: "001", Title: Scenarios()[1].Title}
	c := t.client()
	slug := "release-notes-" + strings.ToLower(t.run())
	plan := []planned{{dsim.Publish, map[string]any{"slug": slug}}}
	v, err := gated(ctx, t, c, "seed-001-"+t.run(), "Write the release notes for version 1.4.", plan)
	if err != nil {
		return res, err
	}
	a, err := approve(ctx, t, c, v, "release approved")
	if err != nil {
		return res, err
	}
	cs := &Case{Label: "approved, published, read back"}
	res.Cases = append(res.Cases, cs)
	if cs.Task, cs.Deliveries, err = settle(ctx, t, c, a); err != nil {
		return res, err
	}
	k := &checker{c: cs}
	checkApproved(k, t, v.ResultSHA256, plan, "content_hash_match")
	if len(cs.Deliveries) == 1 {
		want := dsim.PublicBase + slug
		k.check(cs.Deliveries[0].Receipt.PublicURL == want, "receipt.public_url %s", want)
		if sim := t.Sims[dsim.Publish]; sim != nil {
			dl, ok := sim.Visible()[slug]
			k.check(ok && dl.PayloadSHA256 == v.ResultSHA256, "the public URL shows the approved content")
			if ok {
				k.check(dl.VisibleAt.After(dl.At), "the publication became visible only after a delay (%s)", dl.VisibleAt.Sub(dl.At))
				at, perr := time.Parse(time.RFC3339Nano, cs.Deliveries[0].Receipt.ReadbackAt)
				k.check(perr == nil && !at.Before(dl.VisibleAt), "the readback that completed it ran after the content became visible")
			}
		}
	}
	return res, k.err()
}

func crmFollowUp(ctx context.Context, t *Target) (*Result, error) {
	res := &Result{ID: "004", Title: Scenarios()[2].Title}
	c := t.client()
	crm := t.Sims[dsim.CRM]
	if crm == nil {
		return res, errors.New("no simulated crm destination to count records at")
	}
	before := crm.TotalSideEffects()

	// 004a: one CRM record; the reply is lost, the lookup by client
	// reference resolves it.
	ref := "acme-" + t.run()
	plan := []planned{{dsim.CRM, map[string]any{"client_reference": ref}}}
	v, err := gated(ctx, t, c, "seed-004a-"+t.run(), "Summarise the account review call with ACME and propose the follow-up.", plan)
	if err != nil {
		return res, err
	}
	a, err := approve(ctx, t, c, v, "follow-up approved")
	if err != nil {
		return res, err
	}
	cs := &Case{Label: "approved, one CRM record (unknown outcome resolved by lookup)"}
	res.Cases = append(res.Cases, cs)
	if cs.Task, cs.Deliveries, err = settle(ctx, t, c, a); err != nil {
		return res, err
	}
	k := &checker{c: cs}
	checkApproved(k, t, v.ResultSHA256, plan, "found")
	if len(cs.Deliveries) == 1 {
		dl, ok := crm.Visible()[ref]
		k.check(ok && dl.OperationID == cs.Deliveries[0].TaskID, "the CRM holds exactly one record for client reference %s, made by the delivery", ref)
	}
	if err := k.err(); err != nil {
		return res, err
	}

	// 004b: approved, then withdrawn before any worker took the delivery.
	if t.Hold == nil || t.Release == nil || t.Idle == nil {
		return res, errors.New("the withdraw case needs Target.Hold, Release and Idle")
	}
	ref2 := "acme-withdrawn-" + t.run()
	plan2 := []planned{{dsim.CRM, map[string]any{"client_reference": ref2}}}
	v2, err := gated(ctx, t, c, "seed-004b-"+t.run(), "Summarise the renewal call with ACME and propose the follow-up.", plan2)
	if err != nil {
		return res, err
	}
	t.Hold()
	released := false
	defer func() {
		if !released {
			t.Release()
		}
	}()
	t.say("worker held (deliveries will wait in the queue)")
	a2, err := approve(ctx, t, c, v2, "follow-up approved")
	if err != nil {
		return res, err
	}
	cs2 := &Case{Label: "approved, then withdrawn before execution"}
	res.Cases = append(res.Cases, cs2)
	k2 := &checker{c: cs2}
	k2.check(len(a2.Deliveries) == 1 && a2.Deliveries[0].State == "queued", "the approval created one delivery, still queued (%v)", a2.Deliveries)
	var w TaskView
	if err := c.expect(ctx, http.StatusOK, http.MethodPost, "/tasks/"+v2.TaskID+"/withdraw", "", map[string]any{"note": "the client cancelled the renewal"}, &w); err != nil {
		return res, err
	}
	t.say("approval withdrawn: task %s, deliveries %v", w.State, w.Deliveries)
	k2.check(w.State == "awaiting_approval", "after withdraw the task awaits approval again (got %s)", w.State)
	t.Release()
	released = true
	t.say("worker released; waiting for the queue to drain")
	if err := t.Idle(ctx); err != nil {
		return res, err
	}
	// Close the case: the summary is not sent at all.
	if err := c.expect(ctx, http.StatusOK, http.MethodPost, "/tasks/"+v2.TaskID+"/reject", "", map[string]any{"note": "not needed any more"}, nil); err != nil {
		return res, err
	}
	t.say("rejected after the withdrawal: nothing will be delivered")
	if cs2.Task, err = c.get(ctx, v2.TaskID); err != nil {
		return res, err
	}
	k2.check(cs2.Task.State == "rejected", "task %s is rejected (got %s)", v2.TaskID, cs2.Task.State)
	cs2.Effects = map[string]int{}
	for _, d := range a2.Deliveries {
		dv, err := c.get(ctx, d.TaskID)
		if err != nil {
			return res, err
		}
		cs2.Deliveries = append(cs2.Deliveries, dv)
		k2.check(dv.State == "cancelled", "delivery %s is cancelled (got %s)", d.TaskID, dv.State)
		cs2.Effects[d.TaskID] = crm.SideEffects(d.TaskID)
		k2.check(crm.Calls(d.TaskID) == 0 && crm.SideEffects(d.TaskID) == 0, "the CRM was never called for %s", d.TaskID)
	}
	_, made := crm.Visible()[ref2]
	k2.check(!made, "no CRM record exists for client reference %s", ref2)
	n := crm.TotalSideEffects() - before
	k2.check(n == 1, "the CRM holds exactly one record from this scenario (got %d)", n)
	return res, k2.err()
}

func destNames(p []planned) string {
	var s []string
	for _, x := range p {
		s = append(s, x.destination)
	}
	return strings.Join(s, ", ")
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12] + "…"
	}
	return sha
}
