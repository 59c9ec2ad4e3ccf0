package modeltest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"pgregory.net/rapid"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runs is how many runs (rapid checks) each backend gets unless
// -rapid.checks is given: kumo is fast, moto validates like DynamoDB.
var runs = map[string]int{"kumo": 40, "moto": 4}

// TestPromiseHoldsUnderInterleavings drives the real submit, worker,
// reconciler and operator handlers through rapid-chosen interleavings of
// submits, deliveries (with crashes, pauses, lost replies and slow
// writes), heartbeats, clock moves, reconciler runs, cancels, approvals,
// withdrawals and operator actions, and checks DESIGN §1 after every step
// and once the run has drained (doc.go).
func TestPromiseHoldsUnderInterleavings(t *testing.T) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	_, envGiven := os.LookupEnv("RAPID_CHECKS")
	// Sequential legs: rapid reads its run count from a package flag.
	for _, b := range testenv.Backends() {
		t.Run(b, func(t *testing.T) {
			e := testenv.New(t, b)
			if !given && !envGiven {
				if n, ok := runs[b]; ok {
					old := flag.Lookup("rapid.checks").Value.String()
					_ = flag.Set("rapid.checks", strconv.Itoa(n))
					t.Cleanup(func() { _ = flag.Set("rapid.checks", old) })
				}
			}
			start := time.Now()
			n, st := 0, stats{}
			rapid.Check(t, func(rt *rapid.T) {
				n++
				m := newModel(rt, e)
				m.stats = st
				rt.Repeat(m.actions())
				m.drain(rt)
			})
			t.Logf("%s: %d runs in %s; %s", b, n, time.Since(start).Round(time.Millisecond), st)
			t.Logf("%s: AWS calls %v", b, e.Counter.Calls())
		})
	}
}

// task is what the model knows of one accepted task.
type task struct {
	id, key, body string
	gated         bool
	parent        string // a delivery's approved task
	cancelAsked   bool   // a cancel was answered 200 or 202
	withdrawn     bool   // a delivery of a withdrawn approval
	operatorDone  bool   // an operator resolved it completed
}

// inflight is the worker the model holds at a pause.
type inflight struct {
	m       message
	pl      *plan
	out     <-chan handled
	task    string
	version int64
	deadlMs int64
}

// stats counts what the runs did (the test's log), so a change that
// leaves a step unreachable shows.
type stats map[string]int

func (s stats) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, s[k])
	}
	return b.String()
}

type model struct {
	stats  stats
	ctx    context.Context
	s      *system
	tasks  []*task
	byID   map[string]*task
	keys   int
	paused *inflight
	// leaseEnd is the latest lease end each task's item has shown after a
	// step: a call of the assignment it fenced may run until it plus the
	// call timeout.
	leaseEnd map[string]int64
}

const maxRoots = 3

func newModel(rt *rapid.T, e *testenv.Env) *model {
	md := rapid.SampledFrom([]mode{modePlain, modeReadback, modeIdem}).Draw(rt, "mode")
	safe := md != modeIdem && rapid.Bool().Draw(rt, "retry_safe_generation")
	seed := rapid.Uint64().Draw(rt, "seed")
	s, drop, err := newSystem(context.Background(), e, md, safe, time.Now().UTC().Truncate(time.Millisecond), seed)
	if err != nil {
		rt.Fatalf("system: %v", err)
	}
	m := &model{ctx: context.Background(), s: s, byID: map[string]*task{}, leaseEnd: map[string]int64{}}
	rt.Cleanup(func() {
		m.release()
		drop()
	})
	return m
}

func (m *model) actions() map[string]func(*rapid.T) {
	acts := map[string]func(*rapid.T){
		"submit":    m.submit,
		"deliver":   m.deliver,
		"pause":     m.pause,
		"resume":    m.resume,
		"heartbeat": m.heartbeat,
		"advance":   m.advance,
		"reconcile": m.reconcile,
		"cancel":    m.cancel,
		"approve":   m.approve,
		"withdraw":  m.withdraw,
		"operator":  m.operator,
	}
	// rapid picks an action uniformly: the steps that move a task on get
	// more than one name, so a run is not mostly cancels and submits.
	weight := map[string]int{"deliver": 3, "pause": 2, "resume": 2, "reconcile": 2}
	out := map[string]func(*rapid.T){"": m.check}
	for name, f := range acts {
		for i := range max(weight[name], 1) {
			key := name
			if i > 0 {
				key = fmt.Sprintf("%s_%d", name, i+1)
			}
			out[key] = func(rt *rapid.T) {
				f(rt)
				m.stats[name]++
			}
		}
	}
	return out
}

// ---- actions ----

func (m *model) submit(rt *rapid.T) {
	how := rapid.SampledFrom([]string{"new", "gated", "again", "send_lost"}).Draw(rt, "submit")
	if how == "again" {
		var roots []*task
		for _, t := range m.tasks {
			if t.parent == "" {
				roots = append(roots, t)
			}
		}
		if len(roots) == 0 {
			rt.Skip("nothing to submit again")
		}
		t := rapid.SampledFrom(roots).Draw(rt, "task")
		resp := m.api(rt, submitReq(t.key, t.body), nil)
		var v api.TaskView
		_ = json.Unmarshal([]byte(resp.Body), &v)
		if resp.StatusCode != http.StatusOK || v.TaskID != t.id {
			rt.Fatalf("one request, one task: the same key and payload again got %d (task %q), want 200 for %s: %s", resp.StatusCode, v.TaskID, t.id, resp.Body)
		}
		return
	}
	if len(m.tasks) >= maxRoots*2 || m.roots() >= maxRoots {
		rt.Skip("enough tasks")
	}
	m.keys++
	key := fmt.Sprintf("k%d", m.keys)
	in := map[string]any{"kind": "generate", "input": map[string]any{"prompt": "model " + key}}
	if how == "gated" {
		in["approval"] = map[string]any{"required": true, "expires_in_seconds": int(approvalTTL / time.Second)}
		in["deliver"] = []any{map[string]any{"destination": "notify", "params": map[string]any{"to": "requester@example.com"}}}
	}
	b, _ := json.Marshal(in)
	var ctx context.Context
	if how == "send_lost" {
		ctx = context.WithValue(m.ctx, dropSendKey{}, true)
	}
	resp := m.api(rt, submitReq(key, string(b)), ctx)
	var v api.TaskView
	_ = json.Unmarshal([]byte(resp.Body), &v)
	if resp.StatusCode != http.StatusAccepted || v.TaskID == "" {
		rt.Fatalf("submit %s: %d %s", key, resp.StatusCode, resp.Body)
	}
	t := &task{id: v.TaskID, key: key, body: string(b), gated: how == "gated"}
	m.add(t)
	rt.Logf("submitted %s (%s)", t.id, how)
}

func (m *model) roots() int {
	n := 0
	for _, t := range m.tasks {
		if t.parent == "" {
			n++
		}
	}
	return n
}

func (m *model) add(t *task) {
	if m.byID[t.id] == nil {
		m.tasks = append(m.tasks, t)
		m.byID[t.id] = t
	}
}

// drawPlan draws what a worker invocation meets.
func drawPlan(rt *rapid.T, pause bool) *plan {
	pl := &plan{}
	if pause {
		pl.pause = rapid.SampledFrom([]string{"after_claim", "call_before", "call_after", "after_provider", "write_before", "write_after"}).Draw(rt, "pause")
		if strings.HasPrefix(pl.pause, "write_") {
			pl.pauseOp = rapid.SampledFrom([]string{"claim", "mark", "complete", "retry"}).Draw(rt, "pause_write")
		}
	} else {
		pl.crash = rapid.SampledFrom([]string{"", "", "after_claim", "after_provider", "after_save"}).Draw(rt, "crash")
	}
	pl.fault = rapid.SampledFrom([]string{"", "", "lose_reply", "server_error", "throttle", "bad_request"}).Draw(rt, "answer")
	pl.lostOp = rapid.SampledFrom([]string{"", "", "claim", "mark", "complete", "retry"}).Draw(rt, "lost_reply")
	if pl.lostOp != "" {
		pl.lostHow = rapid.SampledFrom([]string{"timeout", "replay"}).Draw(rt, "lost_how")
	}
	return pl
}

func (m *model) pickMessage(rt *rapid.T) message {
	n := m.s.queue.len()
	if n == 0 {
		rt.Skip("no message")
	}
	return m.s.queue.take(rapid.IntRange(0, n-1).Draw(rt, "message"))
}

// deliver hands one message to a worker, which runs to its end (or dies
// where the plan says). again: SQS delivers the message once more later
// whatever the worker answered.
func (m *model) deliver(rt *rapid.T) {
	msg := m.pickMessage(rt)
	pl := drawPlan(rt, false)
	again := rapid.Bool().Draw(rt, "deliver_again")
	h := m.wait(rt, m.s.invoke(msg, pl), "worker")
	if requeued(h, msg) || again {
		m.s.queue.put(msg)
	}
	rt.Logf("worker %d on %s (%s): crash=%q answer=%q lost=%s/%s, again=%t, back=%t", pl.n, msg.task, msg.id, pl.crash, pl.fault, pl.lostOp, pl.lostHow, again, requeued(h, msg))
}

// pause starts a worker that stops at a point of its attempt (before the
// call, in the call before or after the provider acted, with the reply in
// hand, or with one of its writes in flight) until resume.
func (m *model) pause(rt *rapid.T) {
	if m.paused != nil {
		rt.Skip("a worker is already paused")
	}
	msg := m.pickMessage(rt)
	pl := drawPlan(rt, true)
	out := m.s.invoke(msg, pl)
	select {
	case <-pl.arrived:
		t, err := m.s.clean.Get(m.ctx, msg.task)
		if err != nil {
			rt.Fatalf("read %s: %v", msg.task, err)
		}
		m.paused = &inflight{m: msg, pl: pl, out: out, task: msg.task, version: t.AssignmentVersion, deadlMs: t.DeadlineMs}
		rt.Logf("worker %d on %s (%s) paused at %s %s (version %d): answer=%q lost=%s/%s", pl.n, msg.task, msg.id, pl.pause, pl.pauseOp, t.AssignmentVersion, pl.fault, pl.lostOp, pl.lostHow)
	case h := <-out:
		if requeued(h, msg) {
			m.s.queue.put(msg)
		}
		rt.Logf("worker %d on %s (%s) ended before its pause %s %s: answer=%q lost=%s/%s", pl.n, msg.task, msg.id, pl.pause, pl.pauseOp, pl.fault, pl.lostOp, pl.lostHow)
	case <-time.After(time.Minute):
		rt.Fatalf("worker %d neither paused nor ended within a minute", pl.n)
	}
}

func (m *model) resume(rt *rapid.T) {
	if m.paused == nil {
		rt.Skip("no paused worker")
	}
	p := m.paused
	m.paused = nil
	close(p.pl.release)
	h := m.wait(rt, p.out, "resumed worker")
	if requeued(h, p.m) {
		m.s.queue.put(p.m)
	}
	rt.Logf("worker %d on %s resumed, back=%t", p.pl.n, p.task, requeued(h, p.m))
}

// release lets a paused worker finish (end of a run).
func (m *model) release() {
	if p := m.paused; p != nil {
		m.paused = nil
		close(p.pl.release)
		select {
		case h := <-p.out:
			if requeued(h, p.m) {
				m.s.queue.put(p.m)
			}
		case <-time.After(time.Minute):
		}
	}
}

// heartbeat renews the paused worker's lease while its call runs, as the
// worker's heartbeat does (same write, same fence).
func (m *model) heartbeat(rt *rapid.T) {
	p := m.paused
	if p == nil || (p.pl.pause != "call_before" && p.pl.pause != "call_after") {
		rt.Skip("no call in flight")
	}
	_, err := m.s.work.Ledger.Renew(m.ctx, p.task, p.version, lease, ledger.WithAgeDeadline(p.deadlMs))
	var fe *ledger.FencedError
	if err != nil && !errors.As(err, &fe) {
		rt.Fatalf("renew %s: %v", p.task, err)
	}
	rt.Logf("heartbeat of worker %d on %s: fenced=%t", p.pl.n, p.task, fe != nil)
}

func (m *model) advance(rt *rapid.T) {
	d := rapid.SampledFrom([]time.Duration{2 * time.Second, settle + time.Second, lease + grace + time.Second,
		callTimeout + time.Second, 20 * time.Minute}).Draw(rt, "advance")
	m.s.clock.Advance(d)
	rt.Logf("clock +%s", d)
}

// reconcile runs the reconciler, in one run of four with every readback
// failing (a provider or destination outage): such a task must still end
// final by its age budget, and its review say what is unknown.
func (m *model) reconcile(rt *rapid.T) {
	down := rapid.IntRange(0, 3).Draw(rt, "readback_down") == 0
	m.s.readbackDown.Store(down)
	defer m.s.readbackDown.Store(false)
	sum, err := m.s.recon.Handle(m.ctx, json.RawMessage(`{}`))
	if err != nil {
		rt.Fatalf("reconciler: %v", err)
	}
	rt.Logf("reconciler (readback down %v): examined=%d requeued=%d resent=%d expired_to_unknown=%d parked=%d completed=%d cancelled=%d readback_not_found=%d readback_errors=%d raced=%d",
		down, sum.Examined, sum.Requeued, sum.Resent, sum.ExpiredToUnknown, sum.Parked, sum.Completed, sum.Cancelled, sum.ReadbackNotFound, sum.ReadbackErrors, sum.Raced)
}

func (m *model) pickTask(rt *rapid.T, ok func(*task, *ledger.Task) bool) (*task, *ledger.Task) {
	var cands []*task
	cur := map[string]*ledger.Task{}
	all, _ := m.snapshot(rt)
	for _, t := range m.tasks {
		st := all[t.id]
		if st == nil {
			continue
		}
		if ok(t, st) {
			cands = append(cands, t)
			cur[t.id] = st
		}
	}
	if len(cands) == 0 {
		rt.Skip("no task to act on")
	}
	t := rapid.SampledFrom(cands).Draw(rt, "task")
	return t, cur[t.id]
}

func (m *model) cancel(rt *rapid.T) {
	t, st := m.pickTask(rt, func(t *task, _ *ledger.Task) bool { return t.parent == "" })
	resp := m.api(rt, taskReq("cancel", t.id, ""), nil)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
		t.cancelAsked = true
	case http.StatusConflict:
	default:
		rt.Fatalf("cancel %s (%s): %d %s", t.id, st.State, resp.StatusCode, resp.Body)
	}
	rt.Logf("cancel %s (was %s): %d", t.id, st.State, resp.StatusCode)
}

func (m *model) approve(rt *rapid.T) {
	t, st := m.pickTask(rt, func(t *task, st *ledger.Task) bool { return t.gated && st.State == ledger.StateAwaitingApproval })
	b, _ := json.Marshal(map[string]any{"artifact_sha256": st.ResultSHA256, "note": "model"})
	resp := m.api(rt, taskReq("approve", t.id, string(b)), nil)
	lapsed := st.ApprovalDeadlineMs > 0 && m.s.clock.Now().UnixMilli() >= st.ApprovalDeadlineMs
	switch {
	case resp.StatusCode == http.StatusConflict && lapsed:
		// Past its approval deadline, not yet parked approval_expired.
		rt.Logf("approve %s: 409 past the approval deadline", t.id)
		return
	case resp.StatusCode != http.StatusOK:
		rt.Fatalf("approve %s: %d %s", t.id, resp.StatusCode, resp.Body)
	}
	got, err := m.s.clean.Get(m.ctx, t.id)
	if err != nil {
		rt.Fatalf("read %s: %v", t.id, err)
	}
	for _, id := range got.DeliveryIDs {
		m.add(&task{id: id, parent: t.id})
	}
	rt.Logf("approve %s: deliveries %v", t.id, got.DeliveryIDs)
}

func (m *model) withdraw(rt *rapid.T) {
	t, _ := m.pickTask(rt, func(t *task, st *ledger.Task) bool {
		return t.gated && st.ApprovalState == ledger.ApprovalApproved && len(st.DeliveryIDs) > 0
	})
	resp := m.api(rt, taskReq("withdraw", t.id, `{"note":"model"}`), nil)
	switch resp.StatusCode {
	case http.StatusOK:
		got, err := m.s.clean.Get(m.ctx, t.id)
		if err != nil {
			rt.Fatalf("read %s: %v", t.id, err)
		}
		for _, id := range got.WithdrawnDeliveryIDs {
			if d := m.byID[id]; d != nil {
				d.withdrawn = true
			}
		}
	case http.StatusConflict:
	default:
		rt.Fatalf("withdraw %s: %d %s", t.id, resp.StatusCode, resp.Body)
	}
	rt.Logf("withdraw %s: %d", t.id, resp.StatusCode)
}

func (m *model) operator(rt *rapid.T) {
	t, st := m.pickTask(rt, func(_ *task, st *ledger.Task) bool { return st.State == ledger.StateNeedsReview })
	res := rapid.SampledFrom([]string{ledger.ResolutionRetry, ledger.ResolutionCompleted, ledger.ResolutionFailed}).Draw(rt, "resolution")
	out, err := opsapi.Apply(m.ctx, m.s.clean, m.s.sender, nil, t.id, ledger.OperatorAction{Resolution: res, Note: "model operator", By: "ops@example.com"})
	if res == ledger.ResolutionCompleted && st.ApprovalRequired {
		// A gated task completes only through an approval: refused, and
		// nothing changes.
		now, gerr := m.s.clean.Get(m.ctx, t.id)
		if !errors.Is(err, ledger.ErrInvalidAction) || gerr != nil || now.WriteNonce != st.WriteNonce {
			rt.Fatalf("operator completed on gated %s = %v (changed: %v, read: %v); want ErrInvalidAction, nothing written", t.id, err, gerr == nil && now.WriteNonce != st.WriteNonce, gerr)
		}
		rt.Logf("operator completed on gated %s: refused", t.id)
		return
	}
	if err != nil {
		rt.Fatalf("operator %s on %s (%s): %v", res, t.id, st.ReviewReason, err)
	}
	if !out.Replayed {
		switch res {
		case ledger.ResolutionRetry:
			m.s.newEpoch(t.id)
		case ledger.ResolutionCompleted:
			// A person's resolution, not a worker's result: its evidence
			// is stored as the result, and is not counted as one.
			t.operatorDone = true
		}
	}
	rt.Logf("operator %s on %s (%s)", res, t.id, st.ReviewReason)
}

// ---- the end of a run ----

// drain lets the run end: the paused worker finishes, then every message
// is delivered and the clock moves on with a reconciler run each round,
// without faults, until every task is final. Nothing accepted may stay
// live past its budgets plus the rounds that resolve it.
func (m *model) drain(rt *rapid.T) {
	m.release()
	for round := 0; round < 10; round++ {
		if m.allFinal(rt) {
			return
		}
		for range m.s.queue.len() {
			msg := m.s.queue.take(0)
			if h := m.wait(rt, m.s.invoke(msg, &plan{}), "drain worker"); requeued(h, msg) {
				m.s.queue.put(msg)
			}
		}
		m.check(rt)
		m.s.clock.Advance(20 * time.Minute)
		m.reconcile(rt)
		m.stats["drain_rounds"]++
		m.check(rt)
	}
	var live []string
	all, _ := m.snapshot(rt)
	for _, t := range m.tasks {
		if st := all[t.id]; st != nil && !final(st) {
			live = append(live, t.id+"="+string(st.State))
		}
	}
	rt.Fatalf("nothing lost: still live after the drain: %v", live)
}

func final(st *ledger.Task) bool { return st.State.Terminal() || st.State == ledger.StateNeedsReview }

func (m *model) allFinal(rt *rapid.T) bool {
	all, _ := m.snapshot(rt)
	for _, t := range m.tasks {
		if st := all[t.id]; st == nil || !final(st) {
			return false
		}
	}
	for _, t := range m.tasks {
		st := all[t.id]
		m.stats["end:"+string(st.State)+"/"+st.ReviewReason+st.ErrorClass]++
	}
	m.s.rec.mu.Lock()
	for _, c := range m.s.rec.calls {
		m.stats["calls"]++
		if c.performed {
			m.stats["acted"]++
		}
	}
	m.s.rec.mu.Unlock()
	return true
}

// ---- helpers ----

func (m *model) wait(rt *rapid.T, out <-chan handled, what string) handled {
	select {
	case h := <-out:
		if h.err != nil {
			rt.Fatalf("%s: %v", what, h.err)
		}
		return h
	case <-time.After(time.Minute):
		rt.Fatalf("%s did not end within a minute", what)
	}
	return handled{}
}

func (m *model) api(rt *rapid.T, req events.APIGatewayV2HTTPRequest, ctx context.Context) events.APIGatewayV2HTTPResponse {
	if ctx == nil {
		ctx = m.ctx
	}
	resp, err := m.s.submit.Handle(ctx, req)
	if err != nil {
		rt.Fatalf("api %s: %v", req.RouteKey, err)
	}
	return resp
}

func newReq(method, routeTpl, path, id, body string) events.APIGatewayV2HTTPRequest {
	r := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + routeTpl, RawPath: path,
		Headers: map[string]string{"host": "api.example.com"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: method + " " + routeTpl, Stage: "$default", RequestID: "model",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
		Body: body,
	}
	if id != "" {
		r.PathParameters = map[string]string{"id": id}
	}
	if body != "" {
		r.Headers["content-type"] = "application/json"
	}
	return r
}

func submitReq(key, body string) events.APIGatewayV2HTTPRequest {
	r := newReq(http.MethodPost, "/tasks", "/tasks", "", body)
	r.Headers["idempotency-key"] = key
	return r
}

func taskReq(verb, id, body string) events.APIGatewayV2HTTPRequest {
	return newReq(http.MethodPost, "/tasks/{id}/"+verb, "/tasks/"+id+"/"+verb, id, body)
}
