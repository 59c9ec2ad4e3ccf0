// Package followup builds the tasks a transition of a task causes — its
// follow-ups (DESIGN §15) — for the ledger to create in the same
// TransactWriteItems as the transition (ledger.WithFollowUps,
// Completion.FollowUps, ParkOptions.FollowUps):
//
//   - the deliveries of a plan that delivers without approval, one per
//     plan entry, created with the completion that saves the result they
//     deliver (keyed ledger.DeliveryKey like an approval's, with a "plan"
//     provenance naming the task and the result's hash);
//   - notifications to people, each a deliver task to the email
//     destination (SES v2) or the sns destination (a configured topic):
//     the approvers when a task enters awaiting_approval, the requester
//     when it completes, fails or is parked.
//
// # Notifications are effects
//
// A notification is a deliver task like any other: claimed, fenced, sent
// once, its uncertain outcome never repeated blind (SES and SNS have no
// readback: an uncertain send parks it unknown_outcome for a person). Its
// idempotency key is "notify:<task>:<event>:<n>:<channel>", in the task's
// scope — n is the assignment version (completed, failed,
// awaiting_approval: each happens once per task) or the park's number
// (park_count after it: a task parked again after an operator retry is a
// new event) — so each event is sent at most once per channel. The message
// says what happened and links to the task on the page
// (<page_origin>/#task=<id>; the origin comes from configuration, never
// from a request); it carries no task text.
//
// # Configuration
//
// Config (TASKLEDGER_NOTIFICATIONS, JSON; "" for none):
//
//	{"page_origin":"https://tasks.example.com",
//	 "approvers":{"email":["approver@example.com"],"sns_topic":"approvals"},
//	 "requester":{"email":true,"sns_topic":"requests"}}
//
// The email destination's sender and allow-list and the sns destination's
// topics are the destinations' configuration (TASKLEDGER_DESTINATIONS).
// requester.email sends to the address the submit recorded on the task
// (the JWT's email claim, when the email destination allows it). Without
// a configuration no notification is built and no write is added: a task
// whose plan has no deliveries completes with the one UpdateItem it always
// did.
package followup
