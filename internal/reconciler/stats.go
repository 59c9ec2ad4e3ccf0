package reconciler

import (
	"context"

	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// measure counts live tasks and the oldest age per live state, and open
// review items, within what is left of the time budget.
func (r *run) measure(ctx context.Context) {
	h := r.h
	shards := h.Ledger.Config().Shards
	nowMs := r.now.UnixMilli()
	for _, st := range ledger.Partitions {
		count, oldest := 0, int64(0)
		for shard := range shards {
			if ctx.Err() != nil || !r.timeLeft() {
				r.count(func(s *Summary) { s.Partial = true })
				return
			}
			refs, next, err := tasklist.QueryLive(ctx, h.Ledger, tasklist.LiveQuery{State: st, Shard: shard, Limit: h.pageLimit()})
			if err != nil {
				r.fail(ctx, "query by_state for metrics", err, "state", st, "shard", shard)
				continue
			}
			for _, ref := range refs {
				if ref.BudgetStartMs > 0 && nowMs-ref.BudgetStartMs > oldest {
					oldest = nowMs - ref.BudgetStartMs
				}
			}
			if next == "" {
				count += len(refs)
				continue
			}
			n, err := tasklist.CountLive(ctx, h.Ledger, st, shard)
			if err != nil {
				r.fail(ctx, "count by_state", err, "state", st, "shard", shard)
				continue
			}
			count += n
		}
		r.count(func(s *Summary) {
			s.LiveTasks[st] = count
			s.OldestAgeSeconds[st] = float64(oldest) / 1000
		})
	}

	if n := r.pending(ctx); n >= 0 {
		r.count(func(s *Summary) { s.WatchPending = n })
	}

	open, cursor, byReason := 0, "", map[string]int{}
	for page := 0; ; page++ {
		if page == MaxOpenReviewPages || ctx.Err() != nil || !r.timeLeft() {
			r.count(func(s *Summary) { s.OpenReviewsTruncated = true })
			break
		}
		items, next, err := tasklist.ListOpenReviews(ctx, h.Ledger, 100, cursor)
		if err != nil {
			r.fail(ctx, "list open reviews", err)
			break
		}
		open += len(items)
		for _, it := range items {
			byReason[it.Reason]++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	r.count(func(s *Summary) { s.OpenReviews, s.OpenReviewsByReason = open, byReason })
}

// emit writes the run's EMF records: one per live state (dimension State),
// one per review reason with open items (dimension Reason) and one for the
// run.
func (r *run) emit() {
	w := r.h.Metrics
	if w == nil {
		return
	}
	s := r.sum
	for _, st := range ledger.Partitions {
		n, ok := s.LiveTasks[st]
		if !ok {
			continue
		}
		rec := w.Record("Function", "reconciler", "State", string(st))
		rec.Set("LiveTasks", float64(n), metrics.Count)
		rec.Set("OldestTaskAge", s.OldestAgeSeconds[st], metrics.Seconds)
		if err := rec.Flush(); err != nil {
			r.log.Warn("reconciler: write metrics", "error", err.Error())
		}
	}
	// Open reviews per reason (dimension Reason), for the dashboard; a
	// reason with none open is not written (its line ends).
	for reason, n := range s.OpenReviewsByReason {
		rec := w.Record("Function", "reconciler", "Reason", reason)
		rec.Set("OpenReviews", float64(n), metrics.Count)
		if err := rec.Flush(); err != nil {
			r.log.Warn("reconciler: write metrics", "error", err.Error())
		}
	}
	partial := 0.0
	if s.Partial {
		partial = 1
	}
	rec := w.Record("Function", "reconciler")
	rec.Set("OpenReviews", float64(s.OpenReviews), metrics.Count).
		Set("DispatchesResent", float64(s.Resent), metrics.Count).
		Set("Requeued", float64(s.Requeued), metrics.Count).
		Set("ExpiredToUnknown", float64(s.ExpiredToUnknown), metrics.Count).
		Set("Parked", float64(s.Parked), metrics.Count).
		Set("CompletedFromReadback", float64(s.Completed), metrics.Count).
		Set("ReadbackFound", float64(s.ReadbackFound), metrics.Count).
		Set("ReadbackNotFound", float64(s.ReadbackNotFound), metrics.Count).
		Set("ReadbackNoReadback", float64(s.ReadbackNoReadback), metrics.Count).
		Set("ReadbackErrors", float64(s.ReadbackErrors), metrics.Count).
		Set("PoisonMessages", float64(s.PoisonMessages), metrics.Count).
		Set("DeadLettersDeleted", float64(s.DeadLettersDeleted), metrics.Count).
		Set("Raced", float64(s.Raced), metrics.Count).
		Set("WatchPending", float64(max(s.WatchPending, 0)), metrics.Count).
		Set("SendErrors", float64(s.SendErrors), metrics.Count).
		Set("Errors", float64(s.Errors), metrics.Count).
		Set("Partial", partial, metrics.Count).
		Set("RunDuration", float64(s.DurationMs), metrics.Milliseconds).
		Property("examined", s.Examined)
	if err := rec.Flush(); err != nil {
		r.log.Warn("reconciler: write metrics", "error", err.Error())
	}
}
