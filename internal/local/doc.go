// Package local runs taskledger on one machine, in one process, the way AWS
// runs it: `make run` (cmd/taskledger-local) is Start plus signal handling.
//
// # Model
//
// Start brings up, in order:
//
//   - an AWS endpoint: the embedded emulator (kumo.NewServer(), DynamoDB,
//     SQS and S3 in-process on 127.0.0.1) or an external one
//     (Options.Endpoint: LocalStack, moto_server, a real account);
//   - every table and queue of template.yaml, through internal/stack, named
//     Options.Prefix+"-"+LogicalId, and its payload bucket, named in lower
//     case (reused if they exist) — so the claim-check and document uploads
//     are always on locally;
//   - the three handlers of functions/*, built as their mains build them,
//     sharing one provider (the simulated one by default, so the
//     reconciler's readback sees what the worker did); with
//     Options.Admission the worker admits its calls by those limits on the
//     tasks table, and the submit handler is told the provider's model,
//     whether it takes documents and its tokens per minute
//     (lambdaenv.NewProvider, api.ProviderProfile), so it refuses what the
//     worker could never run exactly as deployed;
//   - their event sources, emulated from the template:
//     an HTTP server on Options.Addr (loopback only) standing in for the
//     HTTP API — the submit handler at /tasks… and /uploads through
//     api.NewHTTPHandler, a PUT-only pass-through at /s3/<bucket>/uploads/…
//     to the emulator that presigned upload URLs name (uploads.go: the
//     page's PUT stays same-origin),
//     the operator API at /reviews… and /overview (its rates are the
//     worker's and the reconciler's EMF records, summed per minute by
//     internal/overview), and the submit handler's public
//     routes: the browser page at / and /static/…, /auth/config —;
//     a Poller standing in for the worker's SQS event source mapping;
//     a Ticker standing in for the reconciler's EventBridge schedule.
//
// # The JWT authorizer (JWTAuthorizer)
//
// Without Options.OIDCIssuer there is no authorizer (auth mode "none", the
// default of `make run`): every caller is anonymous. With it (and
// Options.OIDCAudience), /tasks… sit behind an emulation of the HTTP API's
// JWT authorizer: the bearer JWT's signature is checked against the
// issuer's JWKS (from its discovery document; github.com/coreos/go-oidc),
// iss must equal the issuer, aud must name an audience (or, without aud,
// client_id must), exp/nbf/iat must hold. A missing or refused token gets
// API Gateway's 401 {"message":"Unauthorized"} and never reaches the
// handler; an accepted one's claims (rendered as strings, as API Gateway
// does) and scopes become requestContext.authorizer.jwt, so the handler's
// caller scope is "jwt:<sub>" exactly as deployed. OPTIONS passes (API
// Gateway answers preflights itself), and so do the public routes. The
// operator API (/reviews…) is local only and stays open.
//
// # The SQS event source mapping (Poller)
//
// The Poller reproduces what Lambda's poller does with the mapping's
// settings (stack.Template.SQSEvents):
//
//   - it long-polls the queue (WaitTimeSeconds = PollWait, 20 s like
//     Lambda; 1 s on the embedded emulator, whose long polls are woken only
//     by new messages, not by messages becoming visible again);
//   - it gathers up to BatchSize records, receiving again for at most
//     MaximumBatchingWindow after the first record arrived;
//   - at most MaximumConcurrency batches are in flight; the next receive
//     waits for a free slot, so nothing is received that cannot be worked;
//   - each batch is one invocation whose context has the function's
//     Timeout as deadline and a lambdacontext with a fresh request id;
//   - with ReportBatchItemFailures, every record not named in
//     BatchItemFailures is deleted (DeleteMessageBatch) and the named ones
//     are left alone: they come back when their visibility timeout ends
//     (which the worker itself shortens for a retry). A failure naming an
//     unknown or empty message id fails the whole batch, as in Lambda;
//   - an invocation that returns an error, panics or outlives its timeout
//     deletes nothing: the whole batch comes back after the visibility
//     timeout (and, past maxReceiveCount, SQS moves it to the dead-letter
//     queue).
//
// Receive errors are retried with a capped backoff. The Poller is exported
// for other harnesses (the soak test): fill its fields, set Deliver, Run.
// A Stack's poller can be held (Stack.PausePoller: no receive until
// ResumePoller; messages wait in the queue), as `make demo` does to
// withdraw an approval before any worker picked its deliveries up.
//
// # The schedule (Ticker)
//
// The Ticker invokes the reconciler once at start and then every rate(...)
// period of the template's ScheduleV2 event (Options.ReconcileEvery
// overrides it), with an EventBridge Scheduler payload shaped like
// events/scheduler-tick.json, the function's Timeout as deadline and a
// lambdacontext. Runs never overlap; a tick during a run is dropped.
//
// # Shutdown
//
// Close stops accepting HTTP requests and waits for those in flight, stops
// polling and ticking, gives invocations in flight a grace period
// (DefaultShutdownGrace) before cancelling their contexts, waits for them,
// and stops the embedded emulator. No goroutine is left serving and the
// port is closed when Close returns. A message received but not yet
// invoked when polling stops is simply not deleted: SQS redelivers it.
//
// # Progress
//
// Options.Progress gets human lines (not JSON logs, which go to
// Options.Log): resources created, one line per state-changing API call,
// one per worker batch with its outcomes (read from the worker's EMF batch
// record, so the words match its metrics), one per reconciler run that did
// something, and, every StatusEvery while it changes, a status line with
// the live tasks per state and the open review items.
package local
