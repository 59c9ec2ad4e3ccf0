package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// PageTasks is the page size the list prices are given for: the API's
// default limit.
const PageTasks = api.DefaultListLimit

// PageCost is what one page of a caller-facing list bills: GET /tasks
// (the by_owner index, then the page's items) or GET /approvals (every
// by_state shard of awaiting_approval, then the page's items).
type PageCost struct {
	Name string
	// Tasks shown on the page measured.
	Tasks int
	// Calls are its AWS calls by operation; RRU its read units from item
	// sizes (a Query bills the entries it returns together, a
	// BatchGetItem each item on its own; both eventually consistent).
	Calls map[string]float64
	RRU   float64
	// GBSeconds: the submit function's billed duration for the modelled
	// call time; one invocation.
	GBSeconds float64
}

// USDPerMillion returns the cost of a million such pages at p.
func (c PageCost) USDPerMillion(p Prices) float64 {
	return (c.RRU*p.ReadRequestUnit + p.LambdaRequest + c.GBSeconds*p.LambdaGBSecond) * 1e6
}

// pageCosts seeds PageTasks+5 gated tasks of one caller, completed into
// awaiting_approval with a 100 B prompt and a small result (items as the
// cost rows' small task leaves them), through an unmetered ledger, then
// prices one GET /tasks and one GET /approvals page of PageTasks through
// the metered submit handler.
func pageCosts(ctx context.Context, b *soak.Backend) ([]PageCost, error) {
	g, err := newCostRig(ctx, b, "benchpage")
	if err != nil {
		return nil, err
	}
	defer g.drop()
	lcfg := ledger.Config{TasksTable: g.env.Names.TasksTable, ReviewTable: g.env.Names.ReviewTable, WatchTable: g.env.Names.WatchTable}
	seed, err := ledger.New(awsclient.DynamoDB(b.AWS), lcfg)
	if err != nil {
		return nil, err
	}
	plan := `{"approval":{"expires_in_seconds":3600,"required":true},"deliver":[{"destination":"notify","params":{"to":"requester@example.com"}}]}`
	for i := range PageTasks + 5 {
		t, err := seed.Create(ctx, ledger.NewTask{Scope: api.Anonymous, IdempotencyKey: "page-" + strconv.Itoa(i), Kind: "generate",
			Input: prompt(100, i), PayloadSHA256: hashKey(strconv.Itoa(i)), Plan: plan, ApprovalTTL: time.Hour})
		if err != nil {
			return nil, err
		}
		c, err := seed.Claim(ctx, t.TaskID, ledger.ClaimOptions{Owner: "bench", Lease: time.Minute})
		if err != nil {
			return nil, err
		}
		if _, err := seed.Complete(ctx, t.TaskID, c.AssignmentVersion, ledger.Completion{Result: `{"text":"bench page result"}`, ApprovalTTL: c.ApprovalTTL()}); err != nil {
			return nil, err
		}
	}
	submitLedger, err := ledger.New(awsclient.DynamoDB(g.cfg["submit"]), lcfg)
	if err != nil {
		return nil, err
	}
	h := &api.Handler{Ledger: submitLedger}
	var out []PageCost
	for _, pg := range []struct{ name, path, field string }{
		{"GET /tasks (the caller's tasks, newest first)", "/tasks", "tasks"},
		{"GET /approvals (awaiting the caller's decision, oldest first)", "/approvals", "approvals"},
	} {
		before := g.meter["submit"].usage()
		calls := g.counter["submit"].Calls()
		req := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: pg.path, RawQueryString: "limit=" + strconv.Itoa(PageTasks),
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodGet, Path: pg.path}}}
		resp, _ := h.Handle(ctx, req)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("bench: %s answered %d: %.200s", pg.path, resp.StatusCode, resp.Body)
		}
		var body map[string]json.RawMessage
		var shown []json.RawMessage
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", pg.path, err)
		}
		if err := json.Unmarshal(body[pg.field], &shown); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", pg.path, err)
		}
		if n := len(shown); n != PageTasks {
			return nil, fmt.Errorf("bench: %s showed %d tasks, want a full page of %d", pg.path, n, PageTasks)
		}
		if err := g.meter["submit"].err(); err != nil {
			return nil, err
		}
		u := g.meter["submit"].usage()
		u.sub(before)
		pc := PageCost{Name: pg.name, Tasks: PageTasks, Calls: map[string]float64{}, RRU: u.RRU}
		after := g.counter["submit"].Calls()
		for op, n := range after {
			if d := n - calls[op]; d > 0 {
				pc.Calls[op] = float64(d)
			}
		}
		pc.GBSeconds = LambdaGBSeconds(callTime(diffCalls(after, calls)), g.memory["submit"])
		out = append(out, pc)
	}
	return out, nil
}

func diffCalls(after, before map[string]int) map[string]int {
	d := map[string]int{}
	for op, n := range after {
		if n > before[op] {
			d[op] = n - before[op]
		}
	}
	return d
}
