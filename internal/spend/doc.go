// Package spend is spend accounting: a per-model price table from
// configuration, the cost of a usage, budget reservation for a task or a
// regenerate chain, and a per-caller daily quota (DESIGN §13).
// The submit handler (internal/api/spend.go) checks the quota and shows
// usage; the worker (internal/worker/spend.go) reserves and settles around
// each provider call: on the budget of a budgeted task, and on the
// caller's daily quota.
//
// # Money
//
// Money is integer micro-dollars ([Micros]); prices are micro-dollars per
// million tokens, parsed exactly from plain decimals ([ParseUSD]); the cost
// of a usage is rounded UP to the micro-dollar. No float is ever summed.
//
// # Configuration
//
// [ParseConfig] reads, strictly (unknown fields, missing or negative prices,
// exponents, more than 6 decimals and trailing data are [*ConfigError]):
//
//	{"models": {"<model id>": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15}},
//	 "daily_quota": {"usd": 25}}      // or {"tokens": 2000000}; optional
//
// (Deployed, the template's DailyQuotaTokensPerCaller is the quota when
// the document sets none: internal/lambdaenv.SpendConfigOf.)
//
// A model not in the table is [*UnknownModelError]: the call cannot be
// priced, so it is not made.
//
// # Budgets
//
// A budget ({max_total_tokens, max_cost_usd}; a zero dimension is
// unlimited) is kept on one item of the tasks table keyed
// "spend#" + a budget key — [ChainKey] ("chain.<root id>.<root created>",
// [ChainKeyOf]: the regenerate chain's budget every task of the chain
// reserves on) or [TaskKey] ("<task id>.<created>", [TaskKeyOf]: one
// task's usage, reserved without a limit); the creation (epoch ms, base
// 36) keeps a task id reused after its retention (a new task) apart from
// its predecessor's records (a task or chain created before
// ledger.BudgetNamesSince keeps the id alone) — never a task id ("t_..."),
// never in the by_state index (no state_shard/due_at), with a TTL
// (expires_at, refreshed on every write, [DefaultRetention] = 40 days:
// ledger.MaxApprovalTTL, the longest a task that spent may wait for
// approval, + ledger.DefaultRetention, how long it can then be
// regenerated, + [RetentionMargin]; an item gone sooner would let the
// chain's next task start from nothing spent). [Accountant.Extend] moves
// the expiry on without spending (the submit handler calls it at every
// budgeted regenerate, so a chain growing by regenerates of tasks that
// never called keeps its item). A task parked needs_review has no
// deadline: an operator retry of it after DefaultRetention finds the
// chain's item gone (not covered). Attributes: used_tokens/used_micros (spent + reserved),
// spent_input_tokens, spent_output_tokens, spent_micros, max_tokens,
// max_micros, and one rsv_<hash of the reservation id> per attempt in
// flight. Budgets are separate items rather than attributes on the task so
// a chain's budget is shared by all its tasks and the hot task item stays
// small (DESIGN §12).
//
//   - [Accountant.Reserve] before a provider call: ONE conditional
//     UpdateItem adds the call's maximum (input + max output tokens, priced)
//     if used + reservation <= max on every limited dimension. Concurrent
//     attempts therefore can never together reserve beyond the budget.
//     Refusal is [*BudgetExhaustedError] with spent, reserved, remaining and
//     the refused reservation (the facts for a budget_exhausted review).
//   - [Accountant.Settle] after it, with the provider's reported usage: ONE
//     conditional UpdateItem replaces the reservation by the actual usage.
//     Real spend is always recorded; an attempt whose outcome is unknown is
//     settled at its full reservation (the provider may have charged).
//
// Both are idempotent per reservation id (the worker's is the task id and
// its attempt number, unique per attempt): a retry after a lost reply, or a redelivered
// message, finds its own rsv_ attribute (or its absence, for Settle) and
// changes nothing; ambiguous failures are retried up to MaxAttempts writes.
//
// The bound: spent + reserved <= max holds at every Reserve, so overspend
// is zero while each call's usage stays within its reservation (the
// provider enforces max output tokens). A provider reporting more than was
// reserved overshoots by that excess for that one call; the next Reserve is
// then refused. The worker reserves contract.CallMaximumWith (prompt bytes,
// each document's bound, output) and counts a report above it as
// BoundExceeded. A crashed worker's reservation stays counted (the safe side)
// until the task's next attempt settles it in full
// ([Accountant.SettleIfReserved]: the provider may have billed it; a
// refused no-op when that attempt had settled) — or, when the task never
// runs again (parked or cancelled by the reconciler, resolved by an
// operator), [Accountant.SettleAbandoned] does, on the budgets and the
// daily quota alike: it reads each item for the amount (only the worker
// computed it), then settles each of the run's reservations found there
// with the same conditional write (at nothing for an attempt whose call
// provably never started).
//
// # Daily quota
//
// [Quotas] keeps "quota#<26 base32 chars of SHA-256(scope)>#<YYYY-MM-DD>"
// (UTC day; the scope hashed so any caller identity makes a short key;
// TTL at least two days after the day; only the current day's item is
// ever read or reserved on, so its expiry cannot undercount the cap). The
// item has a budget item's attributes, and the quota is a budget on its
// one dimension (tokens, or micro-dollars): [Quotas.Reserve] and
// [Quotas.Settle] are the Accountant's Reserve and Settle on it, so the
// worker holds each call's maximum on its caller's day before the call
// (one conditional UpdateItem: used + reservation <= quota) and replaces
// it by the reported usage after (on the day it was reserved: a
// [QuotaHold] names it). A refused reservation is [*QuotaExceededError]
// and writes nothing; its methods say what holds the quota:
// [QuotaExceededError.HeldByCallsInFlight] (the settled usage leaves room,
// only reservations of calls in flight keep the call out: the worker
// makes the task wait), [QuotaExceededError.NeverFits] (the call alone is
// larger than the quota: parked, no day has room), or neither (the
// settled usage leaves no room: parked budget_exhausted, error class
// quota_exceeded, until the next UTC day). A Reserve that failed may have
// landed (a lost reply): [Quotas.SettleIfReserved] gives it back at
// nothing, and settles a crashed attempt's in full, without a read.
// [Quotas.Check] is one consistent GetItem and writes nothing: the day's
// settled usage (reservations in flight not counted: they free as their
// calls settle) plus want over the quota is [*QuotaExceededError] with
// RetryAfter to the next UTC day (a 429 with Retry-After at submit; a want
// above the whole quota is the submit's 422). [Quotas.CallNeed] is a
// call's maximum in the quota's unit. [Quotas.Add] records usage without
// a reservation (one unconditional UpdateItem, not retried).
//
// The bound: settled + reserved <= quota holds at every Reserve, so a
// caller's day is charged at most its quota plus, for each of its calls in
// flight, what that call used beyond its reservation. The reservation is
// the call's maximum (an unknown outcome is charged exactly it), so the
// overrun is zero while providers report within it (a report above it is
// logged and counted, BoundExceeded), and at most one reservation per call
// in flight for that caller while none reports more than twice it. Usage
// is counted on the day the call was reserved. A reservation whose worker
// crashed stays counted (the safe side), as a reservation until the task's
// next attempt settles it in full on today's item, or its park, cancel or
// operator's resolution does ([Accountant.SettleAbandoned]).
//
// # Calls per provider call
//
// Budgeted: Reserve 1 UpdateItem + Settle 1 UpdateItem on each of the two
// budget items; with a daily quota, Quotas.Reserve 1 + Quotas.Settle 1
// UpdateItem more (every generate call, budgeted or not), each 1 write unit
// while the item is under 1 KB (a few dozen reservations in flight for
// one caller). Submit: 1 GetItem (0.5 read unit).
package spend
