// Package dispatch is the SQS side of the outbox: the message that tells a
// worker "task X is ready", how it is sent, and how a worker parses it.
//
// The task item in DynamoDB is the durable intention; the message is only a
// wake-up call. Sending it twice is harmless (claims are conditional), and
// losing it is repaired by the reconciler, which re-sends queued tasks whose
// dispatch deadline (due_at) has passed. A message body is exactly
// {"task_id":"t_…"}; anything else is a poison message.
package dispatch
