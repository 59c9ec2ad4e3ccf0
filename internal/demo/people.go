package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
)

// The people around the work (DESIGN §15), scenario 015: a requester
// submits a gated task and finds it in GET /tasks; an approver finds it in
// GET /approvals (with its plan) and approves it; the plan's lambda
// delivery — the example receiving function — completes with the
// function's receipt; and the approvers' email notification is in the
// emulator's SES. Without sign-in (make run's auth mode "none") requester
// and approver are the same anonymous caller, whom the approval policy
// lets decide.

// LambdaFunction is the lambda destination's name of the example function
// the scenario delivers to (as make run registers it).
const LambdaFunction = "example"

// Approver is the address the approvers' notifications go to.
const Approver = "approver@example.com"

// Notify is the TASKLEDGER_NOTIFICATIONS the demo runs with: the
// approvers are mailed when a task awaits their decision.
const Notify = `{"page_origin":"http://127.0.0.1:3000","approvers":{"email":["` + Approver + `"]}}`

// WithPeople adds what scenario 015 needs to c: the email destination
// (mailing @example.com through the emulator's SES) and, unless c names
// it, the lambda function LambdaFunction as fn (its name or ARN at the
// Lambda endpoint the stack is given), read back by lookup.
func WithPeople(c *deliver.Config, fn string) {
	if c.Email == nil {
		c.Email = &deliver.EmailConfig{From: "taskledger@tasks.example.com", AllowedRecipients: []string{"@example.com"}}
	}
	if c.Lambda == nil {
		c.Lambda = &deliver.LambdaConfig{Functions: map[string]deliver.LambdaFunction{}}
	}
	if _, ok := c.Lambda.Functions[LambdaFunction]; !ok {
		c.Lambda.Functions[LambdaFunction] = deliver.LambdaFunction{Function: fn, Lookup: true, NotFoundCredible: true, Timeout: "10s"}
	}
}

// Mail is one message the emulator's SES recorded as sent.
type Mail struct {
	To      []string
	Subject string
	Body    string
}

// SentMail returns a Target.Mail reading what the emulator at endpoint
// recorded as sent: kumo's GET /kumo/ses/v2/sent-emails, moto's
// GET /moto-api/data.json (ses.Message).
func SentMail(endpoint, backend string) func(ctx context.Context) ([]Mail, error) {
	return func(ctx context.Context) ([]Mail, error) {
		get := func(path string, v any) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+path, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
			}
			return json.Unmarshal(b, v)
		}
		var out []Mail
		switch backend {
		case "kumo":
			var r struct {
				SentEmails []struct {
					Destination   struct{ ToAddresses []string }
					Subject, Body string
				}
			}
			if err := get("/kumo/ses/v2/sent-emails", &r); err != nil {
				return nil, err
			}
			for _, m := range r.SentEmails {
				out = append(out, Mail{To: m.Destination.ToAddresses, Subject: m.Subject, Body: m.Body})
			}
		case "moto":
			var r struct {
				SES struct {
					Message []struct {
						Subject      string                         `json:"subject"`
						Body         string                         `json:"body"`
						Destinations struct{ ToAddresses []string } `json:"destinations"`
					} `json:"message"`
				} `json:"ses"`
			}
			if err := get("/moto-api/data.json", &r); err != nil {
				return nil, err
			}
			for _, m := range r.SES.Message {
				out = append(out, Mail{To: m.Destinations.ToAddresses, Subject: m.Subject, Body: m.Body})
			}
		default:
			return nil, fmt.Errorf("no way to read the sent mail of backend %q", backend)
		}
		return out, nil
	}
}

// LambdaLookup returns a Target.Lookup that asks the function fn at the
// Lambda endpoint for its record of an operation (the contract's lookup
// action): what the function itself says it did, not what the API says.
func LambdaLookup(endpoint, fn string) func(ctx context.Context, operationID string) (found bool, receipt string, err error) {
	client := awslambda.New(awslambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: aws.AnonymousCredentials{}})
	return func(ctx context.Context, operationID string) (bool, string, error) {
		ev, _ := json.Marshal(lambda.Event{Action: lambda.ActionLookup, OperationID: operationID})
		out, err := client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: ev})
		if err != nil {
			return false, "", err
		}
		var r example.Reply
		if err := json.Unmarshal(out.Payload, &r); err != nil || r.Found == nil {
			return false, "", fmt.Errorf("lookup of %s: not a lookup reply (%d bytes)", operationID, len(out.Payload))
		}
		return *r.Found, r.Receipt, nil
	}
}

// ExampleFunction is the example receiving function's handler (records in
// memory) served in process behind the Lambda Invoke API: the stand-in for
// the function under aws-lambda-rie where RIE cannot be built.
type ExampleFunction struct {
	// URL is its Invoke API endpoint.
	URL   string
	Store *example.Memory
	srv   *httptest.Server
}

// ServeExampleFunction starts ExampleFunction on a free loopback port.
func ServeExampleFunction() *ExampleFunction {
	store := example.NewMemory()
	h := &example.Handler{Store: store}
	f := &ExampleFunction{Store: store}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev lambda.Event
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ev); err != nil {
			http.Error(w, "bad event", http.StatusBadRequest)
			return
		}
		reply, err := h.Handle(r.Context(), ev)
		if err != nil {
			typ := "Unhandled"
			var rj *example.Rejected
			var rt *example.Retryable
			switch {
			case errors.As(err, &rj):
				typ = lambda.ErrorTypeRejected
			case errors.As(err, &rt):
				typ = lambda.ErrorTypeRetryable
			}
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			_ = json.NewEncoder(w).Encode(map[string]string{"errorType": typ, "errorMessage": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(reply)
	}))
	f.URL = f.srv.URL
	return f
}

// Close stops the server.
func (f *ExampleFunction) Close() { f.srv.Close() }

// approvalItem is one task of GET /approvals: its view and its plan.
type approvalItem struct {
	TaskView
	Plan *struct {
		Deliver []struct {
			Destination string          `json:"destination"`
			Params      json.RawMessage `json:"params"`
		} `json:"deliver"`
	} `json:"plan"`
}

func people(ctx context.Context, t *Target) (*Result, error) {
	res := &Result{ID: "015", Title: scenarioTitle("015")}
	if t.Mail == nil || t.Lookup == nil {
		return res, errors.New("scenario 015 needs the stack's lambda function and its SES (Target.Lookup, Target.Mail)")
	}
	c := t.client()
	plan := []planned{{"lambda", map[string]any{"function": LambdaFunction}}}
	key := "seed-015-" + t.run()
	var deliverPlan []map[string]any
	for _, p := range plan {
		deliverPlan = append(deliverPlan, map[string]any{"destination": p.destination, "params": p.params})
	}
	id, err := c.submit(ctx, key, map[string]any{
		"kind": "generate", "input": map[string]any{"prompt": "Draft the order confirmation for order 4711."},
		"approval": map[string]any{"required": true, "expires_in_seconds": 3600}, "deliver": deliverPlan,
	})
	if err != nil {
		return res, err
	}
	t.say("requester: submitted %s (Idempotency-Key %s), approval required, deliver to lambda:%s", id, key, LambdaFunction)
	cs := &Case{Label: "requester lists, approver approves, the function delivers, the approver was mailed"}
	res.Cases = append(res.Cases, cs)
	k := &checker{c: cs}

	// The requester's list: GET /tasks, newest first.
	var list struct {
		Tasks []TaskView `json:"tasks"`
	}
	if err := c.expect(ctx, http.StatusOK, http.MethodGet, "/tasks?kind=generate&limit=50", "", nil, &list); err != nil {
		return res, err
	}
	i := slices.IndexFunc(list.Tasks, func(v TaskView) bool { return v.TaskID == id })
	k.check(i >= 0, "GET /tasks lists the requester's task %s", id)
	if i >= 0 {
		t.say("requester: GET /tasks lists %s (%s) among %d", id, list.Tasks[i].State, len(list.Tasks))
	}

	v, err := c.await(ctx, id, "awaiting_approval")
	if err != nil {
		return res, err
	}
	t.say("generated; awaiting approval of result_sha256 %s", short(v.ResultSHA256))

	// The approver's inbox: GET /approvals, oldest deadline first, with
	// the plan.
	var inbox struct {
		Approvals []approvalItem `json:"approvals"`
	}
	if err := c.expect(ctx, http.StatusOK, http.MethodGet, "/approvals?limit=100", "", nil, &inbox); err != nil {
		return res, err
	}
	j := slices.IndexFunc(inbox.Approvals, func(a approvalItem) bool { return a.TaskID == id })
	k.check(j >= 0, "GET /approvals shows the task to the approver")
	if j >= 0 {
		a := inbox.Approvals[j]
		k.check(a.ResultSHA256 == v.ResultSHA256, "the inbox shows the result_sha256 to approve (%s)", short(v.ResultSHA256))
		k.check(a.Plan != nil && len(a.Plan.Deliver) == 1 && a.Plan.Deliver[0].Destination == "lambda", "the inbox shows the plan: one delivery to lambda")
		t.say("approver: GET /approvals shows %s with its plan (deliver to lambda)", id)
	}

	a, err := approve(ctx, t, c, v, "confirmation checked")
	if err != nil {
		return res, err
	}
	if len(a.Deliveries) != 1 {
		return res, fmt.Errorf("approve of %s created %d deliveries, want 1", id, len(a.Deliveries))
	}
	d, err := c.watch(ctx, a.Deliveries[0].TaskID, func(d *TaskView) {
		t.say("delivery %s → lambda:%s: %s", d.TaskID, LambdaFunction, d.State)
	}, "completed")
	if err != nil {
		return res, err
	}
	if cs.Task, err = c.get(ctx, id); err != nil {
		return res, err
	}
	cs.Deliveries = []*TaskView{d}
	r := d.Receipt
	appr := cs.Task.Approval
	k.check(cs.Task.State == "completed" && appr != nil && appr.State == "approved", "task %s completed, approval approved", id)
	k.check(r.OperationID == d.TaskID && r.Destination == "lambda", "receipt.operation_id = the deliver task, destination lambda")
	k.check(r.PayloadSHA256 == v.ResultSHA256, "receipt.payload_sha256 = the approved artifact (%s)", short(r.PayloadSHA256))
	k.check(strings.HasPrefix(r.ProviderRef, "ex_"), "receipt.provider_ref is the function's receipt (%q)", r.ProviderRef)
	k.check(appr != nil && r.ApprovedBy == appr.DecidedBy && r.ApprovedAt == appr.DecidedAt, "receipt.approved_by/approved_at = the approval's")
	found, receipt, err := t.Lookup(ctx, d.TaskID)
	k.check(err == nil && found && receipt == r.ProviderRef, "the function's own lookup finds operation %s with the same receipt (found %t, %q, err %v)", d.TaskID, found, receipt, err)
	cs.Effects = map[string]int{}
	if found {
		cs.Effects[d.TaskID] = 1
	}

	// The approvers' notification: a deliver task to the email
	// destination, relayed by the reconciler once its dispatch deadline
	// passed; the emulator's SES shows the mail.
	mails, err := awaitMail(ctx, t, id)
	if err != nil {
		return res, err
	}
	k.check(len(mails) == 1, "exactly one mail to %s names the task (got %d)", Approver, len(mails))
	if len(mails) > 0 {
		m := mails[0]
		k.check(strings.Contains(m.Subject, "needs a decision"), "the mail says the task needs a decision (subject %q)", m.Subject)
		k.check(strings.Contains(m.Body, "#task="+id), "the mail links to the task on the page")
		t.say("approver's mail in the emulator's SES: to %v, subject %q", m.To, m.Subject)
	}
	return res, k.err()
}

// awaitMail waits until the emulator's SES shows mail to Approver naming
// task id (and a second more, so a duplicate would show too).
func awaitMail(ctx context.Context, t *Target, id string) ([]Mail, error) {
	var seenAt time.Time
	for {
		all, err := t.Mail(ctx)
		var mine []Mail
		for _, m := range all {
			if slices.Contains(m.To, Approver) && strings.Contains(m.Body, id) {
				mine = append(mine, m)
			}
		}
		if err == nil && len(mine) > 0 {
			if seenAt.IsZero() {
				seenAt = time.Now()
			} else if time.Since(seenAt) >= time.Second {
				return mine, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no mail to %s about %s in the emulator's SES (last error: %v): %w", Approver, id, err, ctx.Err())
		case <-time.After(250 * time.Millisecond): // the emulator keeps a list, no event
		}
	}
}
