package faultinject

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// ReplayMiddlewareID names the Replayer on a middleware stack.
const ReplayMiddlewareID = "taskledgerFaultReplay"

// Replayer is SDK middleware for the lost reply that the SDK retries: the
// server performs the call, its reply is lost, and the SDK sends the same
// request again — which now meets the state the first one left (a
// conditional write fails its condition on our own write). The caller sees
// only the second reply. Unlike an Injector's LostReply (the caller sees a
// timeout), this is what a write with a lost reply looks like from inside
// a handler whose SDK retries timeouts.
//
// Register it before the Injector (both at the end of the Initialize
// step, in registration order), so each of the two sends passes the
// Injector and its OnResult sees both. It is safe for concurrent use.
type Replayer struct {
	// Decide picks the calls to replay from the call (N is left 0) and its
	// typed input; nil replays nothing. It is called once per call.
	Decide func(c Call, params any) bool
	// OnReplay, if set, is called after a replayed call with the errors of
	// the first send (always nil: only performed calls are replayed) and
	// of the second.
	OnReplay func(c Call, first, second error)
}

// Register adds the Replayer at the end of the Initialize step.
func (r *Replayer) Register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(ReplayMiddlewareID, r.handle), middleware.After)
}

func (r *Replayer) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	c := Call{
		Service:   awsmiddleware.GetServiceID(ctx),
		Operation: awsmiddleware.GetOperationName(ctx),
		TaskID:    TaskIDOf(in.Parameters),
	}
	if r.Decide == nil || !r.Decide(c, in.Parameters) {
		return next.HandleInitialize(ctx, in)
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if err != nil {
		// The first send failed: nothing was performed, nothing to replay.
		return out, md, err
	}
	out, md, err2 := next.HandleInitialize(ctx, in)
	if r.OnReplay != nil {
		r.OnReplay(c, nil, err2)
	}
	return out, md, err2
}
