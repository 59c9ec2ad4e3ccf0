package soak

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// The faults of the unforgiving path: lost replies the SDK retries,
// deadline pressure, queue backlog and expired items still present.

// replayKind is the per-task kind whose write is replayed (a lost reply the
// SDK retries), by the state the UpdateItem sets.
var replayKind = map[string]Kind{
	string(ledger.StateRunning):   ClaimLostReply,
	string(ledger.StateCompleted): CompleteLostReply,
	string(ledger.StateRetryWait): RetryLostReply,
}

// decideReplay picks the first claim, completion or schedule-retry write of
// a task planned for its lost-reply kind.
func (s *soak) decideReplay(c faultinject.Call, params any) bool {
	in, ok := params.(*dynamodb.UpdateItemInput)
	if !ok || c.TaskID == "" {
		return false
	}
	t := s.byID[c.TaskID]
	if t == nil {
		return false
	}
	k, ok := replayKind[newState(in)]
	if !ok || k != t.kind {
		return false
	}
	if k == ClaimLostReply && !setsAttr(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, "lease_owner") {
		return false // a renewal or another running-state write, not the claim
	}
	return s.once(k, c.TaskID)
}

// newState is the state an UpdateItem sets, "" if none.
func newState(in *dynamodb.UpdateItemInput) string {
	for ph, name := range in.ExpressionAttributeNames {
		if name != "state" {
			continue
		}
		set, _, _ := splitSet(aws.ToString(in.UpdateExpression))
		for _, part := range set {
			lhs, rhs, ok := cutEq(part)
			if ok && lhs == ph {
				if v, ok := in.ExpressionAttributeValues[rhs].(*types.AttributeValueMemberS); ok {
					return v.Value
				}
			}
		}
	}
	return ""
}

func (s *soak) onReplay(c faultinject.Call, _, second error) {
	if t := s.byID[c.TaskID]; t != nil {
		s.inject(t.kind)
		if t.kind == RetryLostReply {
			s.mu.Lock()
			s.retryPending[t.id] = true
			s.mu.Unlock()
		}
		if second == nil {
			s.note(t.kind, "a replayed write succeeded twice on "+c.TaskID+" (its condition did not see the first)")
		}
	}
}

// gate stops the poller's receives while closed: the queue backs up as it
// does when consumers are throttled or failing.
type gate struct {
	mu     sync.Mutex
	closed bool
	open   chan struct{} // closed when the gate opens
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) set(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == closed {
		return
	}
	g.closed = closed
	if closed {
		g.open = make(chan struct{})
	} else {
		close(g.open)
	}
}

func (g *gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// wait returns when the gate is open or ctx ended.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	closed, ch := g.closed, g.open
	g.mu.Unlock()
	if !closed {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedSQS is the poller's SQS: receives wait while the gate is closed.
type gatedSQS struct {
	local.PollerSQS
	g *gate
}

func (q gatedSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if err := q.g.wait(ctx); err != nil {
		return nil, err
	}
	return q.PollerSQS.ReceiveMessage(ctx, in, opts...)
}

// backlog closes the gate for BacklogPause, BacklogWindows times,
// BacklogEvery apart, the first time one second in, until submitted is
// closed (a window that has begun runs its full length).
func (s *soak) backlog(ctx context.Context, submitted <-chan struct{}) {
	if s.cfg.NoBacklog {
		return
	}
	next := time.Now().Add(time.Second)
	for range s.cfg.BacklogWindows {
		select {
		case <-ctx.Done():
			return
		case <-submitted:
			return
		case <-time.After(time.Until(next)): // the run's schedule
		}
		s.mu.Lock()
		s.backlogWindows++
		s.mu.Unlock()
		s.gate.set(true)
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.BacklogPause): // the window's length
		}
		s.gate.set(false)
		next = next.Add(s.cfg.BacklogEvery)
	}
}

// pressured splits a batch: records of deadline_pressure tasks until a
// late wave has handled one of them (every message of the task: a backlog
// may have added a relayed copy), and the rest.
func (s *soak) pressured(recs []events.SQSMessage) (late, rest []events.SQSMessage) {
	for _, r := range recs {
		m, err := dispatch.Parse(r.Body)
		if err == nil {
			if t := s.byID[m.TaskID]; t != nil && t.kind == DeadlinePressure && !s.lateDone(t.id) {
				late = append(late, r)
				continue
			}
		}
		rest = append(rest, r)
	}
	return late, rest
}

func (s *soak) lateDone(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired["late_done|"+id]
}

// lateWave hands the held-back records to the worker in the same
// invocation once only LongCall/2 + DeadlineMargin of it is left: as if
// earlier waves of a large batch had taken the time. A call of LongCall
// started now cannot finish before the deadline.
func (s *soak) lateWave(ctx context.Context, late []events.SQSMessage) (events.SQSEventResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		left := s.cfg.LongCall/2 + s.cfg.DeadlineMargin
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(dl.Add(-left))): // the earlier waves' work
		}
	}
	for _, r := range late {
		if m, err := dispatch.Parse(r.Body); err == nil && s.once(DeadlinePressure, m.TaskID) {
			s.inject(DeadlinePressure)
		}
	}
	resp, err := s.work.Handle(ctx, events.SQSEvent{Records: late})
	s.mu.Lock()
	for _, r := range late {
		if m, err := dispatch.Parse(r.Body); err == nil {
			s.fired["late_done|"+m.TaskID] = true
		}
	}
	s.mu.Unlock()
	return resp, err
}

// expireAndResubmit is the ttl_expired fault, after the first drain: each
// completed task of the kind gets expires_at in the past (the item is past
// its TTL, DynamoDB has not deleted it yet), then its key is submitted
// again with the same payload. The promise: an expired item counts as
// absent, so the caller gets a fresh task (202).
func (s *soak) expireAndResubmit(ctx context.Context) {
	past := time.Now().Add(-time.Hour).Unix()
	for _, t := range s.tasks {
		if t.kind != TTLExpired {
			continue
		}
		st, err := s.clean.Get(ctx, t.id)
		if err != nil || st.State != ledger.StateCompleted {
			s.note(TTLExpired, fmt.Sprintf("%s not completed after the first drain; not expired", t.id))
			continue
		}
		_, err = s.cleanDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.env.Names.TasksTable),
			Key:                       map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: t.id}},
			UpdateExpression:          aws.String("SET #e = :e"),
			ExpressionAttributeNames:  map[string]string{"#e": "expires_at"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberN{Value: strconv.FormatInt(past, 10)}},
		})
		if err != nil {
			s.note(TTLExpired, "expire "+t.id+": "+err.Error())
			continue
		}
		s.mu.Lock()
		s.expired[t.id] = st
		s.mu.Unlock()
		s.inject(TTLExpired)
		rec := s.records[t.id]
		body := `{"kind":"generate","input":` + t.input + `}`
		var c call
		for try := range maxSubmitTries {
			c = s.request(ctx, http.MethodPost, "/tasks", t.key, body)
			c.variant = variantTTL
			rec.add(c)
			if c.status < 500 || !s.backoff(ctx, try) {
				break
			}
		}
		rec.finish(variantTTL, t.input, c)
	}
}

// variantTTL is the caller that resubmits a key after its task expired.
const variantTTL = "ttl"

// splitSet returns the assignments of an update expression's SET clause.
func splitSet(expr string) (assignments []string, remove string, ok bool) {
	set, rem, _ := strings.Cut(expr, " REMOVE ")
	set, ok = strings.CutPrefix(strings.TrimSpace(set), "SET ")
	if !ok {
		return nil, rem, false
	}
	return strings.Split(set, ","), rem, true
}

// cutEq splits one assignment at its "=".
func cutEq(part string) (lhs, rhs string, ok bool) {
	l, r, ok := strings.Cut(part, "=")
	return strings.TrimSpace(l), strings.TrimSpace(r), ok
}

// onWatched records a worker's "result discarded" log line, and its
// "retry rejected" line for a task whose schedule-retry write was replayed:
// the first send applied it, so the worker acknowledged a record whose
// message was what should have carried the retry. (Judging by the batch
// response instead misreads a retry whose message came back and completed
// before the scheduling invocation ended.)
//
// A retry rejected because another worker took the task over (a newer
// assignment version: a second copy of the message claimed it once the
// retry came due) is not one: that copy carries the work.
func (s *soak) onWatched(msg, taskID string, version, current, attempts int64) {
	if taskID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch msg {
	case discardedLog:
		s.discarded[taskID] = append(s.discarded[taskID], version)
	case notAdmittedLog:
		s.notAdmitted(taskID)
	case requeuedLog:
		if s.sp.expired[taskID] == nil {
			s.sp.expired[taskID] = map[int]bool{}
		}
		s.sp.expired[taskID][int(attempts)] = true
	case retryFencedLog:
		if s.retryPending[taskID] && current <= version {
			s.retryDropped[taskID]++
		}
	}
}
