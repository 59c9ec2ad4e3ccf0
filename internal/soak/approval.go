package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Workflow kinds (DESIGN §10): the task is submitted with an
// approval gate and a deliver plan, and the soak plays the approver once
// the result awaits approval.
const (
	WfApprove         Kind = "approve"               // one approval of the shown hash
	WfReject          Kind = "reject"                // one rejection
	WfApproveTwice    Kind = "approve_twice"         // the same hash approved twice (concurrently, or one after the other)
	WfApproveReject   Kind = "approve_reject_race"   // an approve and a reject at once
	WfApproveWithdraw Kind = "approve_withdraw_race" // a withdraw racing the approve (or the worker's claim of its deliveries); a withdrawn task is approved again
	WfStaleHash       Kind = "approve_stale_hash"    // an approve of a hash that is not the result (409), then a reject, or the right approve
)

// workflowKinds lists the workflow kinds in report order.
func workflowKinds() []Kind {
	return []Kind{WfApprove, WfReject, WfApproveTwice, WfApproveReject, WfApproveWithdraw, WfStaleHash}
}

func isWorkflow(k Kind) bool {
	switch k {
	case WfApprove, WfReject, WfApproveTwice, WfApproveReject, WfApproveWithdraw, WfStaleHash:
		return true
	}
	return false
}

// workflowExpected are the final states of a workflow kind's task (nil for
// other kinds).
func workflowExpected(t *task) []ledger.State {
	switch t.kind {
	case WfReject:
		return []ledger.State{ledger.StateRejected}
	case WfApproveReject:
		return []ledger.State{ledger.StateCompleted, ledger.StateRejected}
	case WfStaleHash:
		if !t.racing {
			return []ledger.State{ledger.StateRejected}
		}
	}
	if isWorkflow(t.kind) {
		return []ledger.State{ledger.StateCompleted}
	}
	return nil
}

// approvalTTLSeconds is the gate's deadline: far beyond any soak, so no
// workflow task is parked approval_expired while the approver plays.
const approvalTTLSeconds = 3600

// deliverDestinations are the local registry's simulated destinations.
var deliverDestinations = []string{"notify", "publish", "crm"}

// planLen is the length of a workflow task's deliver plan (1 to 3).
func planLen(t *task) int { return 1 + t.i%3 }

// planParams are valid params of destination d for entry i of task n (each
// simulated destination has its own: a recipient, a slug, a client
// reference).
func planParams(d string, n, i int) string {
	switch d {
	case "publish":
		return fmt.Sprintf(`{"slug":"soak-wf-%d-%d"}`, n, i)
	case "crm":
		return fmt.Sprintf(`{"client_reference":"soak-wf-%d-%d"}`, n, i)
	}
	return fmt.Sprintf(`{"to":"soak-wf-%d-%d@example.com"}`, n, i)
}

// planMembers are the submit body's "approval" and "deliver" members of a
// workflow task (with a leading comma); "" for other kinds.
func (t *task) planMembers() string {
	if isPlanLambda(t.kind) {
		return planLambdaMembers()
	}
	if !isWorkflow(t.kind) {
		return ""
	}
	entries := make([]string, planLen(t))
	for i := range entries {
		d := deliverDestinations[(t.i+i)%len(deliverDestinations)]
		entries[i] = fmt.Sprintf(`{"destination":%q,"params":%s}`, d, planParams(d, t.i, i))
	}
	return fmt.Sprintf(`,"approval":{"required":true,"expires_in_seconds":%d},"deliver":[%s]`, approvalTTLSeconds, strings.Join(entries, ","))
}

// wireDecisions builds the API handler the approvers call (after
// s.submit): the submit function's, on clients with the same fault injection but a counter of
// their own. A person's decision is not part of a task's pipeline: its
// reads and the deliveries' dispatch are reported apart from the per-task
// call budgets (DESIGN §9 budgets the submit and worker path of a task).
func (s *soak) wireDecisions(lcfg ledger.Config) error {
	s.deciderCalls = awsclient.NewCounter()
	faulty := s.env.AWS.Copy()
	faulty.APIOptions = append(append([]func(*middleware.Stack) error{}, s.env.AWS.APIOptions...), s.deciderCalls.Register, s.replay.Register, s.inj.Register, s.lat.register)
	led, err := ledger.New(awsclient.DynamoDB(faulty), lcfg)
	if err != nil {
		return err
	}
	// The submit function's handler (every setting it has), on these
	// clients.
	h := *s.submit
	h.Ledger = led
	h.Dispatch = &dispatch.Sender{SQS: awsclient.SQS(faulty), QueueURL: s.env.Names.TaskQueueURL}
	s.decider = &h
	return nil
}

// decisionCall is one answer to an approve, reject or withdraw (after the
// caller's retries of 5xx).
type decisionCall struct {
	verb    string // "approve", "reject", "withdraw"
	variant string // which caller: "a", "b", "stale", "again", "cleanup"
	sha     string // approve: the artifact_sha256 sent
	status  int
	problem string // the problem type's last segment ("artifact-changed", ...)
	// A 200's task view.
	state         string
	approvalState string
	deliveries    []string
}

// workflow is the approvers' side of a run.
type workflow struct {
	mu     sync.Mutex
	calls  map[string][]decisionCall // per task, in answer order
	shown  map[string]string         // the result_sha256 the approver read
	saved  map[string]chan struct{}  // signalled when a worker saved the task's result
	wg     sync.WaitGroup
	gaveUp int
}

func (w *workflow) add(id string, c decisionCall) {
	w.mu.Lock()
	if w.calls == nil {
		w.calls = map[string][]decisionCall{}
	}
	w.calls[id] = append(w.calls[id], c)
	w.mu.Unlock()
}

func (w *workflow) savedCh(id string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.saved == nil {
		w.saved = map[string]chan struct{}{}
	}
	ch := w.saved[id]
	if ch == nil {
		ch = make(chan struct{}, 1)
		w.saved[id] = ch
	}
	return ch
}

// onSaved is the worker's AfterSave hook: wake the task's approver.
func (s *soak) onSaved(id string) {
	if t := s.byID[id]; t != nil && isWorkflow(t.kind) {
		select {
		case s.wf.savedCh(id) <- struct{}{}:
		default:
		}
	}
}

// approveLater starts the approver of an accepted workflow task.
func (s *soak) approveLater(ctx context.Context, t *task) {
	s.wf.wg.Go(func() { s.playApprover(ctx, t) })
}

// waitApprovers waits until every approver has finished.
func (s *soak) waitApprovers() { s.wf.wg.Wait() }

// approverPoll is how often an approver reads its task when no worker's
// save woke it (a completion by the reconciler's readback has no hook).
// Seldom: moto serves one request at a time.
const approverPoll = 5 * time.Second

// awaitApproval waits until t awaits approval (woken by the worker's save,
// or reading the item every approverPoll); nil when it ended otherwise or
// the drain timeout passed.
func (s *soak) awaitApproval(ctx context.Context, t *task) *ledger.Task {
	deadline := time.Now().Add(s.cfg.DrainTimeout)
	woken := s.wf.savedCh(t.id)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := s.clean.Get(ctx, t.id)
		if err == nil {
			switch {
			case st.State == ledger.StateAwaitingApproval:
				return st
			case !st.State.Live():
				return nil // failed, parked or cancelled before a result awaited approval
			}
		}
		select {
		case <-ctx.Done():
		case <-woken:
		case <-time.After(approverPoll): // no hook for every way a result lands: read again
		}
	}
	return nil
}

// playApprover decides on t as its kind says, once its result awaits
// approval.
func (s *soak) playApprover(ctx context.Context, t *task) {
	st := s.awaitApproval(ctx, t)
	if st == nil {
		s.note(t.kind, "a task never awaited approval: "+t.id)
		return
	}
	sha := st.ResultSHA256
	s.wf.mu.Lock()
	if s.wf.shown == nil {
		s.wf.shown = map[string]string{}
	}
	s.wf.shown[t.id] = sha
	s.wf.mu.Unlock()
	round := st.ApprovalRound
	approve := func(variant, h string) decisionCall {
		// The round the approver was shown: a repeat of this approve after
		// a withdraw is refused, not a re-approval over it.
		return s.decision(ctx, t, "approve", variant, h, `{"artifact_sha256":"`+h+`","approval_round":`+strconv.Itoa(round)+`,"note":"soak approves"}`)
	}
	reject := func(variant string) decisionCall {
		return s.decision(ctx, t, "reject", variant, "", `{"note":"soak rejects"}`)
	}
	withdraw := func(variant string) decisionCall {
		return s.decision(ctx, t, "withdraw", variant, "", `{"note":"soak withdraws"}`)
	}
	both := func(a, b func()) {
		var wg sync.WaitGroup
		wg.Go(a)
		wg.Go(b)
		wg.Wait()
	}
	switch t.kind {
	case WfApprove:
		if approve("a", sha).status == http.StatusOK {
			s.inject(t.kind)
		}
	case WfReject:
		if reject("a").status == http.StatusOK {
			s.inject(t.kind)
		}
	case WfApproveTwice:
		if t.racing {
			both(func() { approve("a", sha) }, func() { approve("b", sha) })
			s.inject(t.kind)
		} else if approve("a", sha).status == http.StatusOK {
			approve("b", sha)
			s.inject(t.kind)
		}
	case WfApproveReject:
		both(func() { approve("a", sha) }, func() { reject("b") })
		s.inject(t.kind)
	case WfApproveWithdraw:
		var w decisionCall
		if t.racing {
			both(func() { approve("a", sha) }, func() { w = withdraw("b") })
		} else if approve("a", sha).status == http.StatusOK {
			w = withdraw("b") // racing the worker's claim of the deliveries
		}
		if w.status != 0 {
			s.inject(t.kind) // the withdraw ran
		}
		if w.status == http.StatusOK {
			// The approver reads the task again and approves the round it
			// now shows: a new round, new delivery keys.
			if cur, err := s.clean.Get(ctx, t.id); err == nil {
				round = cur.ApprovalRound
			}
			approve("again", sha)
		}
	case WfStaleHash:
		c := approve("stale", ledger.SHA256Hex("stale:"+sha))
		if c.status == http.StatusConflict {
			s.inject(t.kind)
		}
		if t.racing {
			approve("a", sha)
		} else {
			reject("a")
		}
	}
	// Nothing may stay awaiting approval (the drain waits for it): a
	// decision that never got an answer is settled with a reject, noted.
	if cur, err := s.clean.Get(ctx, t.id); err == nil && cur.State == ledger.StateAwaitingApproval {
		s.wf.mu.Lock()
		s.wf.gaveUp++
		s.wf.mu.Unlock()
		s.note(t.kind, "left awaiting approval, rejected: "+t.id)
		reject("cleanup")
	}
}

// decision is one approver's call, retried on 5xx like a submit.
func (s *soak) decision(ctx context.Context, t *task, verb, variant, sha, body string) decisionCall {
	var c decisionCall
	for try := range maxSubmitTries {
		c = s.decide(ctx, t.id, verb, body)
		if c.status < 500 || !s.backoff(ctx, try) {
			break
		}
	}
	c.verb, c.variant, c.sha = verb, variant, sha
	s.wf.add(t.id, c)
	return c
}

// decide invokes POST /tasks/{id}/{verb} as API Gateway would.
func (s *soak) decide(ctx context.Context, id, verb, body string) decisionCall {
	resp, err := s.decider.Handle(ctx, apiRequest(http.MethodPost, "/tasks/"+id+"/"+verb, "", body))
	if err != nil {
		return decisionCall{status: 599}
	}
	c := decisionCall{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var p api.Problem
		_ = json.Unmarshal([]byte(resp.Body), &p)
		c.problem = p.Type[strings.LastIndex(p.Type, "/")+1:]
		return c
	}
	var v api.TaskView
	_ = json.Unmarshal([]byte(resp.Body), &v)
	c.state = v.State
	if v.Approval != nil {
		c.approvalState = v.Approval.State
	}
	for _, d := range v.Deliveries {
		c.deliveries = append(c.deliveries, d.TaskID)
	}
	return c
}
