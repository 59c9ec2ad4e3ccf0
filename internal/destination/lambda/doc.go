// Package lambda is the "lambda" destination: the receiving team's own AWS
// Lambda function, invoked synchronously (Invoke, RequestResponse) once per
// delivery attempt. The contract the function implements is documented in
// docs/destinations.md; package lambda/example is a function that keeps it.
//
// # Functions, never ARNs
//
// A deliver request names a function ({"function":"orders"}); the function
// name or ARN, whether it answers lookups, its guarantees and a timeout come
// from configuration (Options.Functions). Deployed, every configured
// function must also be in the template's DeliveryLambdaFunctionArns, the
// only functions the worker's role may invoke. A request cannot invoke a
// function configuration does not name.
//
// # The event
//
//	{"action":"deliver","operation_id":"…","attempt":1,"payload_sha256":"<hex>",
//	 "correlation_id":"…","provenance":{…},"params":{…},"payload":{…}}
//
// operation_id is the deliver task's id, the same for every attempt: the
// function acts at most once per operation id. params are the delivery's
// params exactly as submitted (the function name and, optionally, an "args"
// object for the function); provenance (destination.Provenance) says where
// the delivery came from. Lambda authenticates the caller (IAM), so the
// event needs no signature: only a principal allowed lambda:InvokeFunction
// can produce it.
//
// The function answers {"receipt":"<its id for the effect>", ...}. The
// readback event is {"action":"lookup","operation_id":"…"}, answered
// {"found":true,"receipt":"…"} or {"found":false}.
//
// # Outcomes
//
//	reply {"receipt":"…"}                    receipt (provider_ref: the receipt)
//	function error, errorType "Rejected"     Permanent: the function refused the
//	                                         delivery and did not act
//	function error, errorType "Retryable"    Retryable: it did not act, try later
//	any other function error ("Unhandled":   Uncertain: the function may have
//	a panic, a timeout, out of memory)       acted before it failed
//	a reply {"errorType":…} without a        as the function error of that type
//	receipt (a function may return its
//	refusal so; RIE reports errors so)
//	a reply without a receipt                Uncertain
//	TooManyRequestsException, EC2/ENI        Throttled / Retryable: Lambda
//	throttling, ResourceNotReady, ...        refused the invoke, nothing ran
//	not found, access denied, KMS, ...       Misconfigured
//	RequestTooLarge, InvalidRequestContent   Permanent
//	ServiceException and other 5xx           Uncertain: Lambda's own failure
//	                                         may come after the function ran
//	connection never made                    Retryable (not sent)
//	any other transport failure (a lost      Uncertain
//	reply, a timeout after sending)
//
// The SDK's retries are switched off for the invoke: a retried Invoke after
// a lost reply is a second invocation.
//
// # Guarantees and readback
//
// A function is Idempotent only when configured so (the contract asks for
// it; configuration says whether its owners promise it). With lookup
// configured, an uncertain delivery is read back by operation id; "not
// found" is credible only when configured (the function records the
// operation atomically with its effect). Errors name the function, the
// operation id and the error type, never the payload or the reply.
package lambda
