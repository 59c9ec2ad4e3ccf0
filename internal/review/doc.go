// Package review writes the words of a review item: the one-sentence
// summary, and the known / uncertain / safe_actions lists that tell an
// operator what happened, what nobody can tell, and which actions are safe.
//
// # Model
//
// A task is parked (needs_review) for one of a few reasons, and each reason
// has its own constructor here, shared by the worker and the reconciler so
// that the same situation always reads the same way in the DynamoDB console,
// the CLI and the local web page:
//
//   - [BudgetExhausted]: the attempt or age budget ran out (found by the
//     reconciler or at a claim); [BudgetExhaustedAfter] when it runs out as
//     an attempt ends (the worker), quoting that attempt's [Failure] and,
//     for the age budget, when the next attempt could have started.
//   - [UnknownOutcome]: the provider may have produced a result, and it
//     cannot be read back.
//   - [ProviderConfig]: the provider rejected credentials, permissions or
//     the model (fix the configuration, then retry), quoting the attempt's
//     [Failure] (class, reason, HTTP status).
//   - [StaleLease]: a worker stopped renewing its lease mid-call and the
//     step can be neither re-run safely nor read back.
//   - [ResultTooLarge]: the provider call (or a readback) succeeded with a
//     result too large for DynamoDB's 400 KB item; it was not saved; sizes,
//     the provider reference and the S3 offload of DESIGN §12 are quoted
//     ([Result]). Nothing about the outcome is uncertain.
//   - [ResultNotSaved]: a result was returned or read back but saving it
//     was refused as invalid, or kept failing until the age budget ended.
//   - [LapsedResult] is not a park but the resolution of an [UnknownOutcome]
//     item: the attempt was slow, not lost, and the worker saved its result
//     after the park (ledger.CompleteLapsed), so the item is resolved as
//     completed by that worker. [LapsedRefused] likewise resolves it when
//     the lapsed call failed without the provider acting (a rejected input:
//     failed; a transient refusal: retry). A lapsed result that cannot be
//     saved revises the item to [ResultTooLarge] or [ResultNotSaved].
//   - [ApprovalExpired]: a task awaiting approval passed its approval
//     deadline without a decision (the reconciler); its result is saved,
//     nothing was delivered, nothing is uncertain.
//   - [Poison]: a dead-letter message that is not a task reference;
//     [PoisonFrom] also for one a worker acknowledged on the task queue,
//     with its receive count, sent time and correlation id
//     ([PoisonOptions]).
//
// A [Failure] is what the worker learnt from the failure that just happened
// ([FailureOf] builds it from a retrypolicy.Classification and the error):
// its class, reason, HTTP status and the safe error text stored for the
// caller. A task that is found rather than just failed has its last error
// in the task itself, and the functions quote that instead.
//
// The functions are pure: they read the task (never its input or result
// text) and return a [ledger.Review] whose Reason, Summary, Known, Uncertain
// and SafeActions are set; ledger.Park and ledger.PutPoison fill the rest.
// Safe actions name the operator commands of cmd/taskledger
// ("taskledger review retry <id> --park N", "taskledger review resolve
// <id> ... --park N"), each bound to the park the item records, so that one
// copied from a review read earlier never decides a later park. A builder
// is given the task, not the park: N is written as ledger.ParkMark, and the
// ledger's write of the item replaces it with the number it records
// (ledger.Park the task's park_count as read plus one, ledger.PutPoison 1,
// ledger.ReviseLapsed and ledger.ReviseLapsedReview the park they revise).
package review
