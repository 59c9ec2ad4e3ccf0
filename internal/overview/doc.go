// Package overview computes the figures of the local page's Overview tab:
// live tasks per state, the age of the oldest task per live
// state, open review items by reason, and per-minute rates (completions,
// failures, parks, retries, provider calls, tokens, cost). The same figures
// are the CloudWatch dashboard in template.yaml, deployed.
//
// # Where the figures come from
//
// Counts and ages are read from the ledger by [Reader.Read], bounded:
//
//   - one Query per live state and by_state shard (4 states × 16 shards =
//     64 Queries), Limit [PageLimit] entries of the sparse index (its
//     projection is ~200 bytes an entry, so a page is at most ~40 KB: 5 read
//     units, 0.5 for an empty shard). The count and the oldest age (now −
//     budget_start_ms, the task's creation or its last operator retry) are
//     exact for a shard that fits in one page. For a fuller shard the count
//     is completed with a Select COUNT query (no items returned; DynamoDB
//     still reads the entries: about one read unit per 8 KB, ~40 entries)
//     and the age is the oldest among the page read, marked not exact
//     ("at least") — the index is ordered by due_at, not by age.
//
//   - open review items through the open_reviews index, 100 a page, at
//     most [MaxReviewPages] pages; beyond that the count is a lower bound
//     (Truncated). The index projects whole items (1–2 KB each), so a full
//     page is ~25 read units; a handful of open items, 0.5.
//
//   - with a watch table, the submitted tasks not yet checked
//     (tasklist.WatchPending): one consistent Query of the cursors and one
//     consistent Select COUNT Query per shard of the watch items past its
//     cursor (about the last dispatch timeout's submissions, ~90 bytes
//     each: one read unit per ~45). They are queued or running unless
//     they ended, and in no by_state count until the reconciler adopts
//     them, so the page shows them beside the counts ([WatchFigures]).
//
// No table Scan. An idle stack costs 64 × 0.5 + 0.5 = 32.5 read units a
// read, and 17 more with a watch table (consistent reads: 1 each); [Reader.MinInterval] (default 2 s) shares one read among every
// caller in that interval (several tabs, a refresh every few seconds), so
// the page costs at most ~16 read units a second however many tabs watch it.
//
// Rates come from the metrics the code already emits: [Rates] is an
// io.Writer for the EMF lines of internal/metrics (the local stack tees the
// worker's and the reconciler's metrics.Writer into it) and sums the named
// metrics per UTC minute over the last [Minutes] minutes. Event series
// (completions, failures, parks, retries, provider calls) are 0 in a minute
// without one; the usage series ([UsageSeries]) are null ("no data") until
// the worker emits InputTokens/OutputTokens and CostUSD (or CostMicros) —
// see [SeriesMetrics] — so a worker that does not record usage yet is not
// shown as one that spent nothing.
//
// Only counts leave this package: no task text, no ids.
package overview
