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

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
)

// maxSubmitTries bounds a caller's retries of one submit after 5xx.
const maxSubmitTries = 10

// call is one answer the API gave a caller.
type call struct {
	variant  string // which caller: "a", "b" (other payload), "dup", "c0".., "cancel"
	status   int
	taskID   string
	replayed bool
	problem  string // the problem type of a refusal
}

// record is everything the callers of one key saw.
type record struct {
	mu    sync.Mutex
	calls []call
	// final answer per caller (after its retries)
	finals map[string]call
	// inputs per caller
	inputs map[string]string
}

func (r *record) add(c call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *record) finish(variant, input string, c call) {
	r.mu.Lock()
	if r.finals == nil {
		r.finals, r.inputs = map[string]call{}, map[string]string{}
	}
	r.finals[variant] = c
	r.inputs[variant] = input
	r.mu.Unlock()
}

// submitAll runs the callers: Submitters goroutines take the tasks in order,
// paced at SubmitRate; poison messages are spread over the same period.
func (s *soak) submitAll(ctx context.Context) {
	jobs := make(chan *task)
	var wg sync.WaitGroup
	for range s.cfg.Submitters {
		wg.Go(func() {
			for t := range jobs {
				s.submitTask(ctx, t)
			}
		})
	}
	var interval time.Duration
	if s.cfg.SubmitRate > 0 {
		interval = time.Duration(float64(time.Second) / s.cfg.SubmitRate)
	}
	poisonEvery := max(1, len(s.tasks)/s.cfg.Poison)
	sent := 0
	next := time.Now()
	for i, t := range s.tasks {
		if interval > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d): // pacing the callers
				}
			}
			next = next.Add(interval)
		}
		if ctx.Err() != nil {
			break
		}
		if i%10 == 0 {
			s.waitForQueue(ctx)
		}
		jobs <- t
		if i%poisonEvery == poisonEvery/2 && sent < s.cfg.Poison {
			s.sendPoison(ctx, sent)
			sent++
		}
		if (i+1)%500 == 0 {
			s.progress("soak: %s: %d submitted", time.Since(s.start).Round(time.Second), i+1)
		}
	}
	for ; sent < s.cfg.Poison && ctx.Err() == nil; sent++ {
		s.sendPoison(ctx, sent)
	}
	close(jobs)
	wg.Wait()
}

// waitForQueue holds the submitters while the task queue's visible backlog
// is at least MaxQueued and no backlog window is open (see
// Config.MaxQueued). A failed read does not hold them.
func (s *soak) waitForQueue(ctx context.Context) {
	if s.cfg.MaxQueued < 0 {
		return
	}
	for ctx.Err() == nil && !s.gate.isClosed() {
		out, err := s.cleanQ.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(s.env.Names.TaskQueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
		})
		if err != nil {
			return
		}
		n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		if n < s.cfg.MaxQueued {
			return
		}
		s.mu.Lock()
		s.queueWaits++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // polling the queue's depth: SQS has no event for it
		}
	}
}

// submitTask plays the callers of one task according to its kind.
func (s *soak) submitTask(ctx context.Context, t *task) {
	rec := s.records[t.id]
	switch t.kind {
	case DuplicateSubmit:
		if s.submitVariant(ctx, t, rec, "a", t.input).status/100 == 2 {
			s.submitVariant(ctx, t, rec, "dup", t.input)
		}
	case ConcurrentSubmit:
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { s.submitVariant(ctx, t, rec, "c"+strconv.Itoa(i), t.input) })
		}
		wg.Wait()
	case KeyReusedPayload:
		if t.racing {
			var wg sync.WaitGroup
			wg.Go(func() { s.submitVariant(ctx, t, rec, "a", t.input) })
			wg.Go(func() { s.submitVariant(ctx, t, rec, "b", t.other) })
			wg.Wait()
		} else if s.submitVariant(ctx, t, rec, "a", t.input).status/100 == 2 {
			s.submitVariant(ctx, t, rec, "b", t.other)
		}
	case CancelRace:
		if s.submitVariant(ctx, t, rec, "a", t.input).status/100 == 2 {
			s.inject(CancelRace)
			var c call
			for try := range maxSubmitTries {
				c = s.request(ctx, http.MethodPost, "/tasks/"+t.id+"/cancel", "", "")
				c.variant = "cancel"
				rec.add(c)
				if c.status < 500 || !s.backoff(ctx, try) {
					break
				}
			}
			rec.finish("cancel", "", c)
			s.cancelledWhileRunning(t, c) // the worker had claimed it: the rules of cancel_running
		}
	case QuotaExceeded:
		s.submitQuota(ctx, t, rec)
	case ChainBudget:
		s.submitChain(ctx, t, rec)
	case Document, DocumentAltered:
		s.submitDocument(ctx, t, rec)
	default:
		c := s.submitVariant(ctx, t, rec, "a", t.input)
		if c.status/100 == 2 && isWorkflow(t.kind) {
			s.approveLater(ctx, t)
		}
		if c.status/100 == 2 && isStream(t.kind) {
			s.subscribeStream(t)
		}
	}
	if t.kind == DuplicateSubmit || t.kind == ConcurrentSubmit || t.kind == KeyReusedPayload {
		s.inject(t.kind)
	}
}

// submitVariant is one caller: POST /tasks with the key, retried on 5xx
// (the API's Retry-After compressed to tens of milliseconds).
func (s *soak) submitVariant(ctx context.Context, t *task, rec *record, variant, input string) call {
	kind := "generate"
	if isDeliver(t.kind) {
		kind = deliver.Kind
	}
	body := `{"kind":"` + kind + `","input":` + input + t.planMembers() + budgetMember(t) + `}`
	return s.submitBody(ctx, t, rec, variant, input, body)
}

// submitBody is submitVariant with the whole body given.
func (s *soak) submitBody(ctx context.Context, t *task, rec *record, variant, input, body string) call {
	return s.submitWith(ctx, s.submit, t, rec, variant, input, body)
}

// submitWith is submitBody through handler h.
func (s *soak) submitWith(ctx context.Context, h *api.Handler, t *task, rec *record, variant, input, body string) call {
	var c call
	req := apiRequest(http.MethodPost, "/tasks", t.key, body)
	if isNotify(t.kind) {
		req.RequestContext.Authorizer = notifyAuthorizer(t)
	}
	for try := range maxSubmitTries {
		c = s.send(ctx, h, req)
		c.variant = variant
		rec.add(c)
		if c.status < 500 || !s.backoff(ctx, try) {
			break
		}
	}
	rec.finish(variant, input, c)
	if c.status == http.StatusAccepted && s.gate.isClosed() {
		s.inject(QueueBacklog) // accepted while the consumers are stopped
	}
	return c
}

// backoff is a caller's wait before retry try+1 (the API's Retry-After,
// compressed to tens of milliseconds); false when ctx ended.
func (s *soak) backoff(ctx context.Context, try int) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Duration(try+1) * 25 * time.Millisecond):
		return true
	}
}

// request invokes the submit function as API Gateway (HTTP API, payload
// 2.0, no authorizer) would.
func (s *soak) request(ctx context.Context, method, path, key, body string) call {
	return s.requestTo(ctx, s.submit, method, path, key, body)
}

// requestTo is request to handler h.
func (s *soak) requestTo(ctx context.Context, h *api.Handler, method, path, key, body string) call {
	return s.send(ctx, h, apiRequest(method, path, key, body))
}

// send invokes handler h with req.
func (s *soak) send(ctx context.Context, h *api.Handler, req events.APIGatewayV2HTTPRequest) call {
	resp, err := h.Handle(ctx, req)
	if err != nil {
		return call{status: 599}
	}
	var v struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &v)
	replayed := false
	for k, val := range resp.Headers {
		if strings.EqualFold(k, api.HeaderIdempotentReplayed) && val == "true" {
			replayed = true
		}
	}
	return call{status: resp.StatusCode, taskID: v.TaskID, replayed: replayed, problem: problemType(resp)}
}

// apiRequest is the event API Gateway (HTTP API, payload 2.0, no
// authorizer) sends for a request.
func apiRequest(method, path, key, body string) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	if body != "" {
		headers["content-type"] = "application/json"
	}
	if key != "" {
		headers["idempotency-key"] = key
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Headers: headers, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", RequestID: fmt.Sprintf("soak-%d", time.Now().UnixNano()),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
	}
}

// poisonBodies are message bodies that are not task references.
var poisonBodies = []string{
	"this is not json",
	`{"task_id":"not-a-task-id"}`,
	`{"task_id":"t_aaaaaaaaaaaaaaaaaaaaaaaaaa","extra":1}`,
	`[]`,
	`{}`,
}

// sendPoison sends poison message i: even ones to the task queue (the
// worker records them), odd ones straight to the dead-letter queue (the
// reconciler's drain records them).
func (s *soak) sendPoison(ctx context.Context, i int) {
	q, url := "task", s.env.Names.TaskQueueURL
	if i%2 == 1 {
		q, url = "dlq", s.env.Names.DeadLetterQueueURL
	}
	out, err := s.cleanQ.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String(poisonBodies[i%len(poisonBodies)]),
	})
	if err != nil {
		s.note(PoisonMessage, "send failed: "+err.Error())
		return
	}
	s.mu.Lock()
	s.poison = append(s.poison, poisonMsg{id: aws.ToString(out.MessageId), queue: q})
	s.mu.Unlock()
	s.inject(PoisonMessage)
}
