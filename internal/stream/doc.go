// Package stream carries a generation's text to the browser while it is
// produced (streamed replies, docs/streaming.md), without making the
// stream a second truth: the saved result stays the only one.
//
// # Protocol
//
// A client opens the WebSocket API GET /auth/config names (stream_url),
// offering the subprotocol [Subprotocol] and, when the API requires
// sign-in, "bearer.<JWT>" ([BearerProtocolPrefix]); it sends
// {"action":"subscribe","task_id":"..."} ([Subscribe]) and is answered
// {"subscribed":"<task id>"} or an [ErrorFrame] (task-not-found for a task
// that is not the caller's, as GET /tasks/{id} answers 404). Then, per
// attempt of the task, [DeltaFrame]s whose deltas concatenate to the text
// so far (the first frame a connection gets for an attempt starts at the
// first character: a late subscriber catches up), and, only after the
// attempt's result was saved, one [DoneFrame] naming the saved result's
// result_sha256. A retried attempt starts a fresh stream under its own
// attempt number; an attempt that saved nothing ends without a done frame.
//
// # Parts
//
//   - [Gateway] is the WebSocket API's route handler ($connect, subscribe,
//     $disconnect, $default) and [Authorizer] the $connect REQUEST
//     authorizer (JWT checked by a [Verifier]: [OIDCVerifier] in AWS, the
//     emulated HTTP API authorizer under make run). Scopes follow the HTTP
//     API's rules (api.CallerScope).
//   - [Table] is the connections table: connection items (what each
//     connection subscribed to, for $disconnect) and subscription items
//     (one Query lists a task's subscribers), all with a TTL.
//   - [Fanout] runs in the worker: [Attempt.Delta] is the provider call's
//     delta sink, appending to the text kept in memory and never blocking
//     on the network; a goroutine posts what each subscriber has not had
//     (coalescing chunks for [DefaultFlush]) and looks for new subscribers
//     every [DefaultPoll]. [Attempt.Done] posts the done frame after the
//     save; a connection answered 410 is forgotten.
//   - [ConnectionsClient] is the @connections management API
//     (PostToConnection), SigV4-signed for execute-api, the same in AWS and
//     against make run's emulation (package wsgateway).
//
// Nothing here logs a token or task text: ids, counts and error classes.
package stream
