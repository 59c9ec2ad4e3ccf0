// Package soak proves taskledger's promise (DESIGN.md §1) under faults: it
// pushes N tasks through the real submit, worker and reconciler handlers,
// behind the emulated event sources of package local (the SQS event source
// mapping's Poller and the schedule's Ticker), with the simulated provider,
// on an emulator — and injects faults on a seeded schedule. When the run has
// drained, a checker reads the tables and the provider's ledger and reports
// every broken invariant.
//
// # Provider modes
//
// A run uses one mode of the simulated provider ([Config.Mode]):
// [ModeIdempotent] (it honours idempotency keys and reads back by operation
// id), [ModePlain] (neither: every call that reaches it may be a new side
// effect and nothing can be read back — Bedrock-like) and
// [ModePlainReadback] (no idempotency, Lookup by operation id). `make
// soak` runs the three in sequence, each on a fresh stack, and prints one
// table per mode.
//
// # Faults
//
// Each task gets at most one planned fault kind (a seeded shuffle of
// Config.FaultShare × N tasks over the kinds, round-robin, so every kind is
// planned for ⌊share×N/kinds⌋ tasks or one more):
//
//   - the worker dies at a step boundary (worker.Hooks: before the claim,
//     after it, after the provider answered, after the save), once;
//   - the same SQS record is delivered twice, at once (same message id and
//     receipt handle, two invocations) or again after it was handled;
//   - duplicate submits (same key and payload, after the 202), three
//     concurrent submits with one key, and the same key with another payload
//     (after the first, or racing it);
//   - provider faults, scripted per operation on the simulated provider:
//     accept-then-lose-reply, 429 with Retry-After, 5xx, permanent 4xx,
//     credentials, a call slower than the lease, 5xx until the attempt
//     budget is gone;
//   - a stale worker: it pauses after the provider answered until the task
//     was taken from it, then tries to save; once its lease is past the
//     reconcilers' Grace, the pause applies the reconciler's rules to the
//     task itself (reconciler.Handler.HandleTask) rather than wait for a
//     scheduled walk to reach it;
//   - AWS faults as SDK middleware around the real clients (package
//     faultinject): DynamoDB throttling of the submit's put, the claim or the
//     next update; the put performed but its reply lost (503, retried with
//     the same key); the outbox SendMessage failing, or performed with its
//     reply lost;
//   - a cancel racing the worker;
//   - the unforgiving path: the claim, the completion or the
//     schedule-retry write applied with its reply lost and retried by the
//     SDK, whose retry fails its condition on the first send's write
//     (faultinject.Replayer; claim_lost_reply, complete_lost_reply,
//     retry_lost_reply — the last after a scripted 503); deadline pressure
//     (a call of LongCall whose record reaches the worker in a late wave of
//     its invocation, with LongCall/2 + DeadlineMargin left: every message
//     of the task is held back until one such wave ran); an oversized result
//     (the provider answers more than DynamoDB's 400 KB item, on every
//     attempt); a terminal item past its TTL but not deleted (after the
//     first drain, expires_at of each completed ttl_expired task is moved an
//     hour into the past with a direct UpdateItem and its key submitted
//     again: a fresh task is expected, then a second drain);
//   - deliver tasks (DESIGN §10; plan_deliver.go): direct deliver submits to
//     simulated destinations that are not idempotent — notify without a
//     fault (deliver), notify accepting and losing its reply, to be read
//     back by operation id (deliver_lose_reply), crm declared without
//     readback, losing its reply, to be parked unknown_outcome
//     (deliver_no_readback), and publish losing its reply with a readback
//     that shows the publication only 2 s later (deliver_lagging_readback).
//
// Run-wide: on a seeded share of the schedule's ticks two reconcilers run at
// once; poison messages go to the task queue and to its dead-letter queue;
// seeded-rate background faults (Config.Background) hit any handler call;
// queue backlog: BacklogWindows times (default once, one second in), the
// poller stops receiving for BacklogPause (1.5× the DispatchTimeout), so
// queued tasks outlive their dispatch deadline (injected = the tasks
// accepted inside a window).
//
// Time is compressed, not faked: leases of seconds, a queue visibility
// timeout of seconds, retry backoff of milliseconds, an age budget of a
// minute and a reconciler period of a second, all on the wall clock the
// emulator's visibility timeouts also use. Worker invocations carry a
// deadline (FunctionTimeout, 4×Lease) and the worker its margin
// (DeadlineMargin, Lease/4); the provider adapter bounds each call by
// CallTimeout (2×Lease), so a call admitted at the start of an invocation
// fits with its margin and one admitted late does not.
//
// # Checker
//
// After every accepted task is final (or the drain timeout passed) and the
// event sources stopped, the tables are scanned and checked: every accepted
// task is in one of completed, failed, cancelled, needs_review, by the end
// of the second reconciler run that started after its age budget ended
// (and never sooner than one period plus one run budget after it: the
// allowance is measured from the runs, so a loaded machine's slow runs do
// not count against it, while a reconciler that lets budgets overrun misses
// run after run);
// at most one saved result per task (saves are counted at the SDK
// middleware); a completed task's result is the provider's recorded one and
// came from exactly one side effect; side effects ≤ 1 per task (the provider
// honours idempotency keys); attempts ≤ max_attempts; every needs_review
// task has its open review item and every review item a task (or a poison
// message the run sent); submits: no status outside 200/202/422/503, at
// most one 202 per key, 422 only for another payload, the stored input is
// the accepted payload, a 503 for a put that happened is followed by a 200
// replay, and no caller is left with a 5xx for a task that exists; a
// cancel answered 200 ends cancelled and one answered 409 does not.
//
// The unforgiving path adds (each violation names its task and rule):
//
//   - false_uncertainty: every unknown_outcome park, and every review whose
//     text says the provider "may have" acted, had at least one provider
//     call started for that task (the provider's events) — or, the one
//     uncertainty the system cannot resolve, the parked attempt wrote its
//     call-start mark (which comes right before the call) and no call
//     started, and the review says whether the call was sent cannot be
//     known; the report counts both kinds of genuine uncertainty;
//   - recall_after_uncertain (plain modes): the provider is never called
//     again for a task after a call whose outcome the caller could not know
//     (performed, reply lost, interrupted, in flight) unless a Lookup
//     answered not_found in between;
//   - call_cut_by_deadline: no provider call is ended by the invocation's
//     deadline (the worker admits a call only with time for it);
//   - send_messages_per_task, get_items_per_task: the handlers' SQS
//     SendMessage ≤ 1.2 and DynamoDB GetItem ≤ 0.5 per accepted task (the
//     call-counting middleware; the report prints the figure of every
//     operation). A GetItem the ledger sends in place of the old item an
//     engine omitted from a refused conditional write (kumo returns no
//     ALL_OLD; DynamoDB and moto do) is counted apart, as "DynamoDB.GetItem
//     (stand-in for ALL_OLD)", and not held to the budget;
//   - result_over_item_limit, oversized_result_not_parked,
//     result_too_large_without_oversize: no saved result exceeds the item
//     limit, an oversized result parks the task result_too_large, and
//     result_too_large is used for nothing else;
//   - saved_result_reported_discarded, scheduled_retry_acknowledged: a
//     write whose reply was lost is still the worker's — it does not log its
//     saved result as discarded, nor acknowledge the record of a retry it
//     scheduled;
//   - expired_key_replayed: a key resubmitted past its task's expires_at
//     gets a fresh task (202), not a replay;
//   - final_too_late (above) holds on every path, including the new ones.
//
// The S3 claim-check (DESIGN §12; the run's handlers have the Env's payload
// bucket, as deployed): large_input tasks submit an input above the 4 KiB
// inline threshold, oversized_result tasks get a result above the item
// limit, which is now saved through S3 (oversized_result_not_offloaded
// replaces oversized_result_not_parked), and background faults fail S3
// puts and throttle S3 reads. Rules (check_payload.go):
// result_ref_not_winner (a completed task's result reference is
// results/<task>/<created_ms>/<its own assignment_version>, never a
// fenced-out worker's object), result_ref_unreadable (the object behind
// every reference has the reference's size and SHA-256),
// large_input_inline and small_input_offloaded; result_not_the_providers and
// stored_payload_not_accepted compare the resolved bytes.
//
// Documents (DESIGN §12; document.go, check_document.go): the document kinds
// upload a 5-12 KiB text document as a client does — POST /uploads through
// the submit handler, a PUT of the bytes to the presigned URL with
// net/http — and submit a generate task naming it. document: the accepted
// submit, the same key and document again, then the same key with another
// version of the document. document_altered: first bytes other than the
// declared ones (the same size; kumo and moto check no presigned checksum,
// so the bytes arrive), submitted, then the declared bytes under a new
// upload id. Both weigh double in the plan (each also takes a kind's
// share of the unfaulted tasks), so each is planned ≥ 20 times at N=1000.
// The deliberate repeats (the same submit again, the other version's
// upload and submit) go through a copy of the submit handler on clients of
// their own counter, reported on their own line like the approvers'
// decisions: a replay reads the item by design, and the per-task GetItem
// budget is the pipeline's. Rules: document_not_referenced (the item references
// exactly the uploaded bytes' SHA-256 and size under inputs/<sha256>, and
// the object there verifies), document_not_read (a completed task's result
// is the simulated provider's reply naming that SHA-256 and size, computed
// over the bytes it was handed), document_item_large (the item stays under
// 4 KiB: documents by reference), document_replay_not_same_task (200,
// replayed, the same task), document_version_not_rejected (422
// idempotency-key-reused), altered_upload_not_rejected (422
// upload-mismatch) and altered_upload_wrote (the task did not exist right
// after the refusal, and the key's next submit was a fresh 202).
//
// Deliver tasks (check_deliver.go) replace the provider rules with the
// destination's: at most one destination side effect per operation id
// (duplicate_delivery); never called again after an uncertain outcome
// unless a readback proved absence — every call the soak's destinations
// count acts, so at most one call (delivery_recalled_after_uncertain); a
// completed deliver task's result is the destination's receipt for its
// operation and payload hash, with a delivery behind it
// (receipt_without_delivery, receipt_not_the_destinations), a lagging one
// read back by content hash; unknown_outcome only after a call
// (false_uncertainty).
//
// Approval gates (DESIGN §10; approval.go, check_approval.go):
// workflow tasks are submitted with approval{required:true} and a deliver
// plan of one to three simulated destinations (notify, publish, crm); once
// a result awaits approval (woken by the worker's AfterSave hook, or read
// every five seconds) the soak plays the approver through the HTTP handler:
// approve, reject, approve_twice (the same hash twice, concurrently or one
// after the other), approve_reject_race, approve_withdraw_race (a withdraw
// racing the approve, or right after it racing the worker's claim of the
// deliveries; a task withdrawn in time is approved again, a new round) and
// approve_stale_hash (an artifact_sha256 that is not the result, which
// must be refused 409 artifact-changed; then a reject, or the right
// approve). Rules, checked on every deliver task and workflow task:
// delivery_without_parent, delivery_not_of_an_approval,
// delivery_key_mismatch (approval:<task>:<approved sha>:<index>[:r<n>], the
// approved sha the result's), delivery_payload_not_approved,
// delivery_of_unapproved, delivery_of_rejected,
// withdrawn_delivery_started, delivery_count (one per plan entry),
// delivery_not_final, and the answers against the final state:
// approve_200_not_approved, reject_200_not_rejected,
// approve_deliveries_differ, approve_and_reject_both_won,
// race_lost_to_reject_has_deliveries, stale_hash_not_refused,
// stale_hash_delivery, withdraw_refused_but_withdrawn,
// withdrawn_but_not_recorded, unexpected_decision_status. The approvers
// call a handler of their own, with the same fault injection and a
// separate call counter: a person's decision is no part of a task's
// pipeline, so its calls are printed on their own line, outside the
// per-task budgets (the deliver tasks' own worker calls stay in them). What an
// approval's delivery does at its destination is not checked here (its
// state only has to be final).
//
// Spend control (DESIGN §13; spend.go, chain.go,
// check_spend.go). The handlers run as deployed with SPEND_CONFIG and
// PROVIDER_ADMISSION: a price table for the simulated model, a daily token
// quota (QuotaTokens at submit: room for one quota_exceeded call; the
// worker reserves every call on the same items against WorkerQuotaTokens,
// which no soak reaches, since one quota holds every caller and the main
// caller's tasks would not fit QuotaTokens) and admission of AdmissionRequests calls per
// AdmissionWindow (1 s) for the model — far above the soak's submit rate,
// so calls wait only when a window is full. Every provider call is
// admitted first; budgeted tasks reserve and settle on spend# items. The
// submit handler has no Budgets (the task view's usage is not checked), and
// a second one, with the daily quota, serves the dedicated quota caller
// (JWT subject QuotaSub). Task scans skip every tasks-table key not
// starting with "t_" (spend#, quota#, adm# items). Kinds:
//
//   - budget_tight: a token budget of one call's reservation and a half (or
//     two), with two scripted 5xx forcing retries;
//   - chain_budget: a root with a budget of about one call and a half; once
//     it is final, two regenerates of it are sent at once (planned tasks
//     beyond N, keyed "<root key>-r<i>") and reserve on the same chain
//     budget: one of them is usually parked budget_exhausted;
//   - quota_exceeded: the quota caller's first task goes ahead, the others
//     wait until its settled call leaves no room for theirs (settled
//     usage + one call's bound over QuotaTokens), then get 429 (injected
//     = 429s; Report.Refused);
//   - admission_wait: the task's own admit (told by its admission
//     estimate: its output bound is its own) is refused as DynamoDB
//     refuses an admit into a full window, once, so the task waits for a
//     later window (injected = the task's first "not admitted" log);
//   - cancel_running: the first call is slow; while it is in flight at the
//     provider, POST /tasks/{id}/cancel (202). A cancel_race cancel that
//     found its task running (202) is held to the same rules.
//
// Rules: spend_over_budget (a chain's and a task's spend# item never spent
// more than the budget plus one call's reservation);
// admission_window_over_limit (no window saw more provider calls start than
// its limit, counted at the provider); admission_wait_consumed_attempt
// (the first call after the wait carries the attempt number of the claim
// that waited, unless background AWS faults touched the task, or one more
// for each attempt in between that the reconciler re-queued at its lease's
// expiry);
// quota_429_wrote and quota_429_without_retry_after; call_after_cancel (no
// call of a later attempt than the one the cancel fenced started after the
// cancel answered), cancelled_with_result, cancel_not_by_unknown_rules
// (completed only by a readback — never in plain mode — and needs_review
// only as unknown_outcome).
//
// Follow-up tasks (followup.go, check_followup.go): the
// handlers run with requester notifications by email
// (TASKLEDGER_NOTIFICATIONS {"requester":{"email":true}}), the email
// destination on the emulator's SES and the lambda destination's function
// "example" (the example function's handler in process behind the Invoke
// API, its records in memory, with its lookup). Kinds: plan_lambda (a
// plan without approval delivering to the function), plan_lambda_lose_reply
// (the function acts, its reply is lost: read back by lookup),
// notify_completed and notify_parked (submitted with a JWT carrying the
// requester's address: NotifyScope; parked by refused credentials) and
// notify_lose_reply (SendEmail performed, its reply lost). Rules:
// plan_delivery_count, plan_delivery_key_mismatch,
// plan_delivery_payload_not_result, duplicate_delivery_act (exactly one act
// per operation id), delivery_reinvoked_blind, completed_without_act,
// receipt_not_the_functions, lost_reply_not_read_back,
// follow_up_not_final, follow_up_of_unplanned; notification_count (exactly
// one per (task, event)), notification_of_event_not_happened,
// duplicate_notification_send, notification_completed_without_send,
// lost_notification_not_parked, false_uncertainty and, on kumo,
// emulator_sends_differ (its GET /kumo/ses/v2/sent-emails, this run's
// mail only). Follow-ups are not accepted tasks: no caller's 202 accepted
// them, so their calls count against their parents' per-task budgets.
//
// Streamed tasks (stream.go, check_stream.go): the stream kinds'
// generations stream through stream.Fanout (the worker's own) to an
// in-memory connections table and @connections; a client subscribes right
// after the 202. Kinds: stream, stream_dropped (410 Gone after the first
// frame; the client re-subscribes), stream_killed (the worker dies after
// its streamed call, before the save) and stream_retried (attempt 1
// streams part of a reply, then a 503). Rules: stream_done_not_saved,
// stream_done_twice, stream_delta_after_done, stream_seq_broken,
// stream_text_not_result, stream_frame_unreadable, stream_attempt_unknown.
//
// [Report.WriteTable] prints fault kind × planned tasks × injected × final
// states (rejected included) × violations.
package soak
