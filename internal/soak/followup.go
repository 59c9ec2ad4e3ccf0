package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/email"
	"github.com/taskledger/taskledger/internal/destination/lambda"
	"github.com/taskledger/taskledger/internal/destination/lambda/example"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Follow-up tasks in the soak (package followup): tasks a
// transition creates in its own transaction — the deliveries of a plan
// without approval, and notifications of the requester.
//
// The plan kinds deliver to the lambda destination's function "example":
// the example function's handler (package lambda/example, its records in
// memory) served in process behind the Lambda Invoke API, so every invoke
// and every act is counted per operation id. The notify kinds are
// submitted by a caller whose JWT carries an email address; the handlers
// run with requester notifications by email (followup.Config), sent through
// the emulator's SES v2 by the email destination. Every SendEmail is
// counted per operation id, and on kumo the emulator's own record of sent
// mail is read back to confirm the count.
const (
	PlanLambda          Kind = "plan_lambda"            // a plan without approval delivering to the example function
	PlanLambdaLoseReply Kind = "plan_lambda_lose_reply" // the function acts, its reply is lost: read back by lookup, never invoked twice
	NotifyCompleted     Kind = "notify_completed"       // the requester is mailed when the task completes
	NotifyLoseReply     Kind = "notify_lose_reply"      // SES sends the requester's mail, its reply is lost: parked unknown_outcome after one send
	NotifyParked        Kind = "notify_parked"          // the task is parked (credentials refused), the requester is mailed
)

// Names the follow-up kinds use.
const (
	// ExampleFunction is the lambda destination's function name of the
	// soak's example function.
	ExampleFunction = "example"
	// NotifySub is the JWT subject of the notified requester; its scope is
	// NotifyScope.
	NotifySub   = "soak-requester"
	NotifyScope = "jwt:" + NotifySub
	// notifyDomain is the requesters' mail domain (the email destination's
	// allow-list) and the sender's.
	notifyDomain = "soak.example.com"
)

func followUpKinds() []Kind {
	return []Kind{PlanLambda, PlanLambdaLoseReply, NotifyCompleted, NotifyLoseReply, NotifyParked}
}

func isPlanLambda(k Kind) bool { return k == PlanLambda || k == PlanLambdaLoseReply }

func isNotify(k Kind) bool { return k == NotifyCompleted || k == NotifyLoseReply || k == NotifyParked }

// expectedFollowUp are the final states of a follow-up kind's task (nil
// for other kinds).
func expectedFollowUp(k Kind) []ledger.State {
	switch {
	case k == NotifyParked:
		return []ledger.State{ledger.StateNeedsReview}
	case isPlanLambda(k) || isNotify(k):
		return []ledger.State{ledger.StateCompleted}
	}
	return nil
}

// planLambdaMembers is the submit body's plan of a plan kind's task (with
// a leading comma): one delivery to the example function, no approval.
func planLambdaMembers() string {
	return `,"deliver":[{"destination":"lambda","params":{"function":"` + ExampleFunction + `"}}]`
}

// requesterEmail is the address the notify kinds' caller presents.
func requesterEmail(t *task) string { return fmt.Sprintf("requester-%d@%s", t.i, notifyDomain) }

// notifyAuthorizer is the JWT authorizer of a notify kind's caller.
func notifyAuthorizer(t *task) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{
		Claims: map[string]string{"sub": NotifySub, "email": requesterEmail(t), "email_verified": "true"}}}
}

// notifyConfig is the handlers' TASKLEDGER_NOTIFICATIONS: the requester is
// mailed. Only tasks whose submit recorded an address (the notify kinds)
// have anyone to mail; every other task completes with the one write it
// always did.
func notifyConfig() (*followup.Config, error) {
	return followup.Parse(`{"page_origin":"https://soak.example.com","requester":{"email":true}}`)
}

// fuState is what the follow-up destinations saw, per operation id.
type fuState struct {
	mu      sync.Mutex
	fn      *example.Handler
	store   *example.Memory
	invokes map[string][]invokeEvent // lambda: per operation id, in order
	sends   map[string]int           // SES SendEmail calls that reached the emulator, per operation id
	parent  map[string]string        // operation id → the task whose follow-up it is
	lost    map[string]bool          // operation ids whose reply was dropped
	// maybeSent counts SendEmail calls that failed after their request may
	// have left (a timeout, a reset: destination.TransportFailure's
	// uncertain): nobody can tell whether they reached the emulator.
	maybeSent map[string]int
	// mailBefore is how many mails the emulator had recorded as sent when
	// the run began (sentMail).
	mailBefore int
}

// invokeEvent is one invoke of the example function.
type invokeEvent struct {
	action string // lambda.ActionDeliver or lambda.ActionLookup
	acted  bool   // deliver: the function recorded the operation (its effect)
	found  bool   // lookup: the answer
	lost   bool   // the reply was dropped after the function ran
}

// soakLambda is the Lambda Invoke API of the example function, in process.
// The first deliver invoke of a plan_lambda_lose_reply task's delivery
// runs the function, then loses its reply as a client timeout would.
type soakLambda struct{ s *soak }

func (f soakLambda) Invoke(ctx context.Context, in *awslambda.InvokeInput, _ ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	s, fu := f.s, &f.s.fu
	var ev lambda.Event
	if err := json.Unmarshal(in.Payload, &ev); err != nil {
		return &awslambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(`{"errorType":"BadEvent","errorMessage":"not an event"}`)}, nil
	}
	reply, err := fu.fn.Handle(ctx, ev)
	e := invokeEvent{action: ev.Action}
	if err == nil {
		e.acted = ev.Action == lambda.ActionDeliver && !reply.Duplicate
		e.found = reply.Found != nil && *reply.Found
	}
	fu.mu.Lock()
	if ev.Provenance != nil && ev.Provenance.TaskID != "" {
		fu.parent[ev.OperationID] = ev.Provenance.TaskID
	}
	parent := s.byID[fu.parent[ev.OperationID]]
	if ev.Action == lambda.ActionDeliver && err == nil && parent != nil && parent.kind == PlanLambdaLoseReply && !fu.lost[ev.OperationID] {
		fu.lost[ev.OperationID], e.lost = true, true
	}
	fu.invokes[ev.OperationID] = append(fu.invokes[ev.OperationID], e)
	fu.mu.Unlock()
	if parent != nil && ev.Action == lambda.ActionDeliver && (e.lost || parent.kind == PlanLambda) && s.once(parent.kind, ev.OperationID) {
		s.inject(parent.kind)
	}
	if e.lost {
		return nil, &faultinject.LostReplyError{Call: faultinject.Call{Service: "Lambda", Operation: "Invoke", TaskID: ev.OperationID}}
	}
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
		b, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": err.Error()})
		return &awslambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: b}, nil
	}
	b, _ := json.Marshal(reply)
	return &awslambda.InvokeOutput{StatusCode: 200, Payload: b}, nil
}

// soakSES is the email destination's SES v2 client: the emulator's, with
// every SendEmail counted per operation id (its operation_id tag). The
// first send of a notify_lose_reply task's notification reaches the
// emulator, then its reply is lost.
type soakSES struct {
	s     *soak
	inner *sesv2.Client
}

func (c soakSES) SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	s, fu := c.s, &c.s.fu
	op := ""
	for _, tag := range in.EmailTags {
		if aws.ToString(tag.Name) == "operation_id" {
			op = aws.ToString(tag.Value)
		}
	}
	// The notification's parent, read without faults (not a handler's call).
	parentID := ""
	if n, err := s.clean.Get(context.WithoutCancel(ctx), op); err == nil {
		parentID = n.ParentTaskID
	}
	out, err := c.inner.SendEmail(ctx, in, optFns...)
	fu.mu.Lock()
	if err == nil {
		fu.sends[op]++
	} else if mayHaveLeft(err) {
		fu.maybeSent[op]++
	}
	fu.parent[op] = parentID
	parent := s.byID[parentID]
	lose := err == nil && parent != nil && parent.kind == NotifyLoseReply && !fu.lost[op]
	if lose {
		fu.lost[op] = true
	}
	fu.mu.Unlock()
	if err == nil && parent != nil && isNotify(parent.kind) && s.once(parent.kind, op) {
		s.inject(parent.kind)
	}
	if lose {
		return nil, &faultinject.LostReplyError{Call: faultinject.Call{Service: "SESv2", Operation: "SendEmail", TaskID: op}}
	}
	return out, err
}

// followUpDestinations are the lambda and email destinations of the
// follow-up kinds, and the notification configuration (wire, before the
// handlers).
func (s *soak) followUpDestinations(ctx context.Context) ([]destination.Destination, error) {
	s.fu = fuState{store: example.NewMemory(), invokes: map[string][]invokeEvent{}, sends: map[string]int{}, parent: map[string]string{}, lost: map[string]bool{}, maybeSent: map[string]int{}}
	s.fu.fn = &example.Handler{Store: s.fu.store}
	fn, err := lambda.New(lambda.Options{Client: soakLambda{s: s}, Functions: map[string]lambda.Function{
		ExampleFunction: {FunctionName: "soak-example-destination", Lookup: true, NotFoundCredible: true, Timeout: s.cfg.CallTimeout},
	}})
	if err != nil {
		return nil, err
	}
	// The SES calls are counted with the handlers' (they are the worker's)
	// but get no injected faults but the scripted lost reply.
	cfg := s.env.AWS.Copy()
	cfg.APIOptions = append(append([]func(*middleware.Stack) error{}, s.env.AWS.APIOptions...), s.counter.Register)
	ses := sesv2.NewFromConfig(cfg)
	// moto, like SES, refuses an unverified sender; kumo verifies nothing.
	var exists *sestypes.AlreadyExistsException
	if _, err := sesv2.NewFromConfig(s.env.AWS).CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(notifyDomain)}); err != nil && !errors.As(err, &exists) {
		s.note(NotifyCompleted, "CreateEmailIdentity: "+err.Error())
	}
	mail, err := email.New(email.Options{From: "noreply@" + notifyDomain, AllowedRecipients: []string{"@" + notifyDomain}, Client: soakSES{s: s, inner: ses}})
	if err != nil {
		return nil, err
	}
	if sent, ok := s.sentMail(ctx); ok {
		s.fu.mailBefore = len(sent)
	}
	if s.notify, err = notifyConfig(); err != nil {
		return nil, err
	}
	return []destination.Destination{fn, mail}, nil
}

// mayHaveLeft reports whether a failed call's request may have reached the
// service: no reply from it (a service error is a definite answer), and
// not refused before sending — the email destination's own steering
// (destination.TransportFailure) calls such a failure uncertain.
func mayHaveLeft(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return false
	}
	return !errors.Is(destination.TransportFailure(err, err), retrypolicy.ErrRequestNotSent)
}
