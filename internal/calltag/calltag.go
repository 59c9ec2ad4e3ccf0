// Package calltag marks the context of an AWS call with why it is made,
// for the call counters (awsclient.Counter) to count it apart. It imports
// nothing, so the ledger and the AWS clients both use it without either
// depending on the other.
package calltag

import "context"

type standInKey struct{}

// StandIn marks ctx as that of the consistent GetItem the ledger sends in
// place of the old item a refused conditional write should have returned
// (ReturnValuesOnConditionCheckFailure=ALL_OLD), where the engine omitted
// it (kumo). DynamoDB returns that item with the refusal, at no read cost,
// so such a read exists only on such an engine.
func StandIn(ctx context.Context) context.Context {
	return context.WithValue(ctx, standInKey{}, true)
}

// IsStandIn reports whether ctx was marked by StandIn.
func IsStandIn(ctx context.Context) bool {
	v, _ := ctx.Value(standInKey{}).(bool)
	return v
}
