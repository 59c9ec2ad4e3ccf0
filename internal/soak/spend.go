package soak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/internal/provider/simulated"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// Spend-control fault kinds (DESIGN §13).
const (
	// BudgetTight: a budget covering one call's reservation (or two), with
	// retries forced by scripted provider faults.
	BudgetTight Kind = "budget_tight"
	// ChainBudget: a root with a budget for about one call, then two
	// regenerates of it at once, sharing the chain's budget (chain.go).
	ChainBudget Kind = "chain_budget"
	// QuotaExceeded: submits of the dedicated quota caller (QuotaScope),
	// whose daily quota has room for one of its calls, and none for
	// another once that one settled: 429, nothing written.
	QuotaExceeded Kind = "quota_exceeded"
	// AdmissionWait: the model's admission window is filled right after
	// the claim, so the call must wait for the next window.
	AdmissionWait Kind = "admission_wait"
	// CancelRunning: POST /tasks/{id}/cancel while the provider call is in
	// flight.
	CancelRunning Kind = "cancel_running"
)

// The spend configuration of a soak run.
const (
	// QuotaSub is the JWT subject of the dedicated quota caller; its scope
	// is QuotaScope.
	QuotaSub   = "soak-quota"
	QuotaScope = "jwt:" + QuotaSub
	// QuotaTokens is the daily token quota the quota caller's submits are
	// checked against, as deployed (api: settled usage + one call's bound,
	// the reservations of calls in flight not counted): room for one call
	// of a quota_exceeded task — its bound is "soak task <i>" (10 bytes
	// and i's digits) + 32 input tokens and max_tokens 8: 51 to 59 tokens
	// for any i below 10^9 — and none for another once that call settled
	// (the simulated provider reports 3 + 8 = 11 tokens, and 11 + 51 >
	// 60; a call charged its full reservation leaves even less). A quota
	// of 1 token, as before, would now refuse every such task 422
	// exceeds-daily-quota: no day has room for its call.
	QuotaTokens = 60
	// WorkerQuotaTokens is the daily token quota the worker reserves every
	// call on, per caller, on the same quota# items: one no soak reaches.
	// A quota is the deployment's, the same for every caller, and one
	// worker serves the soak's main caller too, whose thousands of tasks
	// QuotaTokens would park; the quota caller's rule is exercised at
	// submit, on the usage its calls settle on these items.
	WorkerQuotaTokens = 1 << 40
	// AdmissionWindow, AdmissionRequests and AdmissionTokens are the
	// simulated model's admission limit: far above what the soak's submit
	// rate needs, so only admission_wait (and bursts) make calls wait.
	AdmissionWindow   = time.Second
	AdmissionSlots    = 10 // 100 ms
	AdmissionRequests = 200
	AdmissionTokens   = 1_000_000_000
	// quotaBudgetTokens is the (generous) budget of a quota caller's task:
	// budgeted calls are what charge the quota.
	quotaBudgetTokens = 1_000_000
)

// spendConfig is the run's price table and quota (SPEND_CONFIG).
var spendConfig = `{"models":{"` + simulated.DefaultModel + `":{"input_usd_per_mtok":3,"output_usd_per_mtok":15}},"daily_quota":{"tokens":` + strconv.Itoa(QuotaTokens) + `}}`

// expectedSpend are the final states of the kinds of this file (nil for
// other kinds).
func expectedSpend(k Kind) []ledger.State {
	switch k {
	case BudgetTight, ChainBudget:
		return []ledger.State{ledger.StateCompleted, ledger.StateNeedsReview}
	case CancelRunning:
		return []ledger.State{ledger.StateCancelled, ledger.StateCompleted, ledger.StateNeedsReview}
	}
	return nil
}

// spendState is what the spend-control kinds record during a run (guarded
// by soak.mu).
type spendState struct {
	prices      *spend.Config
	budgets     *spend.Accountant // clean client: the checker's reads
	quotaSubmit *api.Handler      // the submit handler with the daily quota (the dedicated caller's)
	quotas      *spend.Quotas     // clean client: the callers' wait for the quota to fill
	model       string
	opened      bool // the first quota caller went ahead

	retryAfter map[string]string       // quota_exceeded: Retry-After of each 429, per task
	cancelAt   map[string]time.Time    // a cancel while running: when it answered 202
	cancelAtt  map[string]int          // and the attempt of the assignment it fenced
	waitClaim  map[string]int          // admission_wait: attempts of the claim the fault made wait
	armed      map[string]int64        // admission_wait: the estimate of each task whose admit is to be refused (fullWindows)
	waited     map[string]int          // "not admitted" logs per task
	touched    map[string]int          // background AWS faults per task
	expired    map[string]map[int]bool // the attempts of the assignments the reconciler re-queued at their lease's expiry, per task
}

// callMax is the tokens one call of input reserves (the worker's
// callMaximum).
func callMax(input string) int64 {
	g, err := contract.ParseGenerateInput([]byte(input))
	if err != nil {
		return int64(len(input)) + contract.InputOverheadTokens + contract.MaxTokensLimit
	}
	in, out := contract.CallMaximum(g)
	return in + out
}

// budgetOf is the budget a task of kind k submits (0: none). budget_tight
// tasks alternate between a budget of one call's reservation and of two.
func budgetOf(t *task) int64 {
	switch t.kind {
	case BudgetTight:
		if t.racing {
			return 2 * callMax(t.input)
		}
		return callMax(t.input) + callMax(t.input)/2
	case ChainBudget:
		return callMax(t.input) + callMax(t.input)*2/5
	case QuotaExceeded:
		return quotaBudgetTokens
	}
	return 0
}

// budgetMember is the "budget" member of t's POST /tasks body ("" for
// none).
func budgetMember(t *task) string {
	if b := budgetOf(t); b > 0 {
		return `,"budget":{"max_total_tokens":` + strconv.FormatInt(b, 10) + `}`
	}
	return ""
}

// wireSpend adds spend control to the handlers, as deployed with
// SPEND_CONFIG and PROVIDER_ADMISSION: the worker reserves and settles
// budgets, charges the daily quota and asks for admission before every
// call; the dedicated quota caller's submits go through a handler that
// checks its quota.
func (s *soak) wireSpend(ddb *dynamodb.Client) error {
	table := s.env.Names.TasksTable
	prices, err := spend.ParseConfig([]byte(spendConfig))
	if err != nil {
		return err
	}
	budgets, err := spend.NewAccountant(spend.AccountantConfig{DB: ddb, TasksTable: table})
	if err != nil {
		return err
	}
	quotas, err := spend.NewQuotas(spend.QuotasConfig{DB: ddb, TasksTable: table, Quota: *prices.Quota})
	if err != nil {
		return err
	}
	workerQuotas, err := spend.NewQuotas(spend.QuotasConfig{DB: ddb, TasksTable: table, Quota: spend.Quota{Unit: spend.UnitTokens, Limit: WorkerQuotaTokens}})
	if err != nil {
		return err
	}
	adm, err := admission.New(admission.Config{
		DB: fullWindows{DB: ddb, s: s}, TasksTable: table, Window: AdmissionWindow, Slots: AdmissionSlots,
		Limits: map[string]admission.Limit{simulated.DefaultModel: {RequestsPerWindow: AdmissionRequests, TokensPerWindow: AdmissionTokens}},
	})
	if err != nil {
		return err
	}
	s.sp = spendState{
		prices: prices, model: simulated.DefaultModel,
		retryAfter: map[string]string{}, cancelAt: map[string]time.Time{}, cancelAtt: map[string]int{}, waitClaim: map[string]int{}, armed: map[string]int64{},
		waited: map[string]int{}, touched: map[string]int{}, expired: map[string]map[int]bool{},
	}
	if s.sp.budgets, err = spend.NewAccountant(spend.AccountantConfig{DB: s.cleanDB, TasksTable: table}); err != nil {
		return err
	}
	if s.sp.quotas, err = spend.NewQuotas(spend.QuotasConfig{DB: s.cleanDB, TasksTable: table, Quota: *prices.Quota}); err != nil {
		return err
	}
	s.work.Spend = &worker.Spend{Prices: prices, Budgets: budgets, Quotas: workerQuotas}
	s.work.Admission = &worker.Admission{Admitter: adm, Model: simulated.DefaultModel}
	// The submit handler is left without Budgets: the task view's usage
	// (two GetItems per response for a budgeted task, the 202 of a
	// submit included) is not what the soak checks, and its share of
	// budgeted tasks is far above a deployment's.
	s.sp.quotaSubmit = &api.Handler{Ledger: s.submit.Ledger, Dispatch: s.submit.Dispatch, Log: s.log, Payloads: s.submit.Payloads,
		Quotas: quotas}
	return nil
}

// touch records a background AWS fault on a task's call.
func (s *soak) touch(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	s.sp.touched[id]++
	s.mu.Unlock()
}

// submitQuota is the dedicated quota caller: POST /tasks as QuotaScope,
// retried on 5xx like any caller. A 429 is final (its Retry-After is a
// UTC day). The first of its tasks goes ahead; the others wait until that
// one's settled call leaves no room for theirs (at most quotaWait), so
// they are refused.
func (s *soak) submitQuota(ctx context.Context, t *task, rec *record) {
	s.mu.Lock()
	first := !s.sp.opened
	s.sp.opened = true
	s.mu.Unlock()
	if !first {
		s.awaitQuotaUsed(ctx, callMax(t.input))
	}
	body := `{"kind":"generate","input":` + t.input + budgetMember(t) + `}`
	var c call
	for try := range maxSubmitTries {
		var retryAfter string
		c, retryAfter = s.requestAs(ctx, QuotaSub, http.MethodPost, "/tasks", t.key, body)
		c.variant = "a"
		rec.add(c)
		if c.status == http.StatusTooManyRequests {
			s.inject(QuotaExceeded)
			s.mu.Lock()
			s.sp.retryAfter[t.id] = retryAfter
			s.mu.Unlock()
		}
		if c.status < 500 || !s.backoff(ctx, try) {
			break
		}
	}
	rec.finish("a", t.input, c)
}

// quotaWait bounds a quota caller's wait for the quota to be used up (the
// first task's settled call; a reservation in flight does not count):
// long enough for that call on a loaded
// machine — at 30 s a slow moto run let the second caller go ahead before
// it, and no 429 was injected.
const quotaWait = 90 * time.Second

// awaitQuotaUsed waits until the quota caller's settled usage leaves no
// room for a call of want tokens (or quotaWait passed: then the submit
// simply goes ahead).
func (s *soak) awaitQuotaUsed(ctx context.Context, want int64) {
	deadline := time.Now().Add(quotaWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var qe *spend.QuotaExceededError
		if err := s.sp.quotas.Check(ctx, QuotaScope, want); errors.As(err, &qe) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // polling the quota item: DynamoDB has no event for it
		}
	}
	s.note(QuotaExceeded, "a quota caller went ahead before the quota was used up")
}

// requestAs is request with a JWT authorizer naming sub, on the quota
// caller's handler; it also returns the Retry-After header.
func (s *soak) requestAs(ctx context.Context, sub, method, path, key, body string) (call, string) {
	headers := map[string]string{"content-type": "application/json", "idempotency-key": key}
	req := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: path, Headers: headers, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			Stage: "$default", RequestID: fmt.Sprintf("soak-q-%d", time.Now().UnixNano()),
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}}},
		},
	}
	resp, err := s.sp.quotaSubmit.Handle(ctx, req)
	if err != nil {
		return call{status: 599}, ""
	}
	c := call{status: resp.StatusCode}
	if resp.StatusCode/100 == 2 {
		c.taskID = taskIDOf(resp.Body)
	}
	retryAfter := ""
	for k, v := range resp.Headers {
		switch {
		case strings.EqualFold(k, "retry-after"):
			retryAfter = v
		case strings.EqualFold(k, api.HeaderIdempotentReplayed) && v == "true":
			c.replayed = true
		}
	}
	return c, retryAfter
}

func taskIDOf(body string) string {
	const k = `"task_id":"`
	i := strings.Index(body, k)
	if i < 0 {
		return ""
	}
	rest := body[i+len(k):]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// afterClaim wraps the AfterClaim hook: right after an admission_wait
// task's claim (once), its call's admission is armed to be refused, once
// (fullWindows), so it must wait for a later window. The claim's attempt
// count is recorded: the wait must give it back.
//
// The refusal is made at the admit itself, not by a fill of the window
// at a time picked ahead: a fill made late in the window, before the
// admit, missed it whenever a loaded machine stalled the worker past the
// window's end (CI: "fault kinds never injected: [admission_wait]"). And
// it is this task's admit alone, told by its estimate (an admission_wait
// task's output bound is its own, admissionWaitMaxTokens + n).
func (s *soak) afterClaim(next func(context.Context, string) error) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		if err := next(ctx, id); err != nil {
			return err
		}
		t := s.byID[id]
		if t == nil || t.kind != AdmissionWait || !s.once(AdmissionWait, id) {
			return nil
		}
		cur, err := s.clean.Get(ctx, id)
		if err != nil {
			s.note(AdmissionWait, "read after the claim failed: "+err.Error())
			return nil
		}
		if s.work.Admission == nil {
			return nil
		}
		est := s.work.Admission.Estimate(cur.Input)
		s.mu.Lock()
		s.sp.waitClaim[id] = cur.Attempts
		s.sp.armed[id] = est
		s.mu.Unlock()
		return nil
	}
}

// admissionWaitMaxTokens (+ n, for the n-th admission_wait task) is an
// admission_wait task's output bound, far above every other task's 8 and
// under contract.MaxTokensLimit for any N below 250,000: its admission
// estimate is its own.
const admissionWaitMaxTokens = 2000

// disarm reports whether an admit of est tokens is an armed
// admission_wait task's, and disarms it: each is refused once.
func (s *soak) disarm(est int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, a := range s.sp.armed {
		if a == est {
			delete(s.sp.armed, id)
			return true
		}
	}
	return false
}

// fullWindows is the workers' admission DB: the admit (the Admitter's
// counting UpdateItem) of an armed admission_wait task is answered as
// DynamoDB answers an admit into a full window — its condition failed,
// nothing written — without being sent, whatever the timing. Nothing else
// is touched: filling the window itself to its limit refused every other
// admit in it too (thousands of waits in a 2,000-task run, breaking the
// GetItem and SendMessage budgets), and overwrote counts admits had just
// made. The condition itself is proven on kumo and moto by the admission
// package's tests; here it is the worker's handling of the refusal.
type fullWindows struct {
	admission.DB
	s *soak
}

func (f fullWindows) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if est, ok := admitEstimate(in); ok && f.s.disarm(est) {
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("soak: the window is full (admission_wait)")}
	}
	return f.DB.UpdateItem(ctx, in, opts...)
}

// admitEstimate returns the estimate of an Admitter's admit (the
// UpdateItem that counts a call in its window); ok=false for any other
// write.
func admitEstimate(in *dynamodb.UpdateItemInput) (int64, bool) {
	k, ok := in.Key["task_id"].(*types.AttributeValueMemberS)
	if !ok || !admission.IsWindowKey(k.Value) || in.UpdateExpression == nil || !strings.HasPrefix(*in.UpdateExpression, "ADD #req :one") {
		return 0, false
	}
	n, ok := in.ExpressionAttributeValues[":est"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	est, err := strconv.ParseInt(n.Value, 10, 64)
	return est, err == nil
}

func numAttr(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// notAdmitted records a worker's "not admitted" log for a task.
func (s *soak) notAdmitted(id string) {
	s.sp.waited[id]++ // soak.mu is held (onWatched)
	if t := s.byID[id]; t != nil && t.kind == AdmissionWait && s.sp.waited[id] == 1 {
		s.injected[AdmissionWait]++
	}
}

// generate is the provider call behind countingProvider: a cancel_running
// task's first call is cancelled through the API while it is in flight at
// the provider.
func (s *soak) generate(ctx context.Context, req contract.Request) (contract.Result, error) {
	t := s.byID[req.OperationID]
	if t == nil || t.kind != CancelRunning || !s.once(CancelRunning, t.id) {
		return s.prov.Generate(ctx, req)
	}
	type answer struct {
		res contract.Result
		err error
	}
	before := len(s.prov.Events(t.id))
	done := make(chan answer, 1)
	go func() {
		res, err := s.prov.Generate(ctx, req)
		done <- answer{res, err}
	}()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !inFlight(s.prov.Events(t.id), before) {
		select {
		case a := <-done: // over before it could be seen in flight
			s.note(CancelRunning, "call of "+t.id+" ended before the cancel")
			return a.res, a.err
		case <-tick.C: // awaiting the provider's record of the call
		}
	}
	s.cancelWhileRunning(context.WithoutCancel(ctx), t)
	a := <-done
	return a.res, a.err
}

// inFlight reports whether a call after the first before events is in
// flight at the provider.
func inFlight(evs []simulated.Event, before int) bool {
	for _, e := range evs[min(before, len(evs)):] {
		if e.Kind == simulated.EventCall && e.End.IsZero() {
			return true
		}
	}
	return false
}

// cancelWhileRunning is the caller's cancel of t (retried on 5xx), while
// its provider call is in flight: a 202 is expected (a 200 if the call
// ended first and the task went back to waiting).
func (s *soak) cancelWhileRunning(ctx context.Context, t *task) {
	rec := s.records[t.id]
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
	if s.cancelledWhileRunning(t, c) {
		s.inject(CancelRunning)
		return
	}
	s.note(CancelRunning, fmt.Sprintf("cancel of %s answered %d", t.id, c.status))
}

// cancelledWhileRunning records when a cancel answered 202 (the running
// attempt fenced, the task unknown until the reconciler decides): the
// checker holds the task to the rules of a cancel while running.
func (s *soak) cancelledWhileRunning(t *task, c call) bool {
	if c.status != http.StatusAccepted {
		return false
	}
	at := time.Now()
	// The task as the cancel left it (a clean read): the attempt of the
	// fenced assignment. A cancelled task is never claimed again.
	att := -1
	if cur, err := s.clean.Get(context.Background(), t.id); err == nil {
		att = cur.Attempts
	}
	s.mu.Lock()
	s.sp.cancelAt[t.id] = at
	s.sp.cancelAtt[t.id] = att
	s.mu.Unlock()
	return true
}
