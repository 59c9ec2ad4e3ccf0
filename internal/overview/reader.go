package overview

import (
	"context"
	"sync"
	"time"

	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// PageLimit is the Limit of the one by_state Query per shard.
const PageLimit = 200

// MaxReviewPages bounds the open-review count (100 items a page).
const MaxReviewPages = 10

// DefaultMinInterval is how long one read is shared by every caller.
const DefaultMinInterval = 2 * time.Second

// StateFigures are one live state's figures.
type StateFigures struct {
	State ledger.State `json:"state"`
	Count int          `json:"count"`
	// OldestAgeSeconds is now − budget_start_ms of the oldest task read
	// (0 with no task). OldestExact is false when a shard held more than one
	// page: then it is the oldest among the entries read (a lower bound).
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	OldestExact      bool    `json:"oldest_exact"`
}

// ReviewFigures count open review items.
type ReviewFigures struct {
	Open     int            `json:"open"`
	ByReason map[string]int `json:"by_reason"`
	// Truncated: more than MaxReviewPages pages; the counts are lower bounds.
	Truncated bool `json:"truncated"`
}

// ReadCost says what the read cost, for the page's footnote.
type ReadCost struct {
	Queries int `json:"queries"`
}

// Overview is the response of GET /overview.
type Overview struct {
	GeneratedAt time.Time      `json:"generated_at"`
	States      []StateFigures `json:"states"`
	// Watch is null when the ledger has no watch table: then every queued
	// and running task is in the active count.
	Watch   *WatchFigures `json:"watch"`
	Reviews ReviewFigures `json:"reviews"`
	// Rates is null when the server has no metrics stream (no Rates).
	Rates *RateView `json:"rates"`
	Cost  ReadCost  `json:"cost"`
}

// Reader reads the overview from the ledger (bounded: see the package
// doc) and the rates from Rates.
type Reader struct {
	Ledger *ledger.Ledger
	Rates  *Rates // optional
	// MinInterval shares one read among callers (default
	// DefaultMinInterval; negative: never shared).
	MinInterval time.Duration
	// PageLimit is the Limit of the Query per shard (default PageLimit).
	PageLimit int32
	Now       func() time.Time

	mu   sync.Mutex
	last *Overview
	at   time.Time
}

func (r *Reader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Read returns the figures, reusing a read younger than MinInterval.
// Concurrent callers wait for one read instead of each making their own.
func (r *Reader) Read(ctx context.Context) (Overview, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	every := r.MinInterval
	if every == 0 {
		every = DefaultMinInterval
	}
	now := r.now()
	if r.last != nil && every > 0 && now.Sub(r.at) < every {
		o := *r.last
		if r.Rates != nil {
			rv := r.Rates.View()
			o.Rates = &rv
		}
		return o, nil
	}
	o, err := r.read(ctx, now)
	if err != nil {
		return Overview{}, err
	}
	r.last, r.at = &o, now
	return o, nil
}

func (r *Reader) read(ctx context.Context, now time.Time) (Overview, error) {
	o := Overview{GeneratedAt: now.UTC(), Reviews: ReviewFigures{ByReason: map[string]int{}}}
	nowMs := now.UnixMilli()
	shards := r.Ledger.Config().Shards
	limit := r.PageLimit
	if limit <= 0 {
		limit = PageLimit
	}
	for _, st := range ledger.Partitions {
		f := StateFigures{State: st, OldestExact: true}
		oldest := int64(0)
		for shard := range shards {
			refs, next, err := tasklist.QueryLive(ctx, r.Ledger, tasklist.LiveQuery{State: st, Shard: shard, Limit: limit})
			o.Cost.Queries++
			if err != nil {
				return Overview{}, err
			}
			for _, ref := range refs {
				if ref.BudgetStartMs > 0 && nowMs-ref.BudgetStartMs > oldest {
					oldest = nowMs - ref.BudgetStartMs
				}
			}
			if next == "" {
				f.Count += len(refs)
				continue
			}
			n, err := tasklist.CountLive(ctx, r.Ledger, st, shard)
			o.Cost.Queries++ // at least one; one per 1 MB of index read
			if err != nil {
				return Overview{}, err
			}
			f.Count += max(n, len(refs))
			f.OldestExact = false
		}
		f.OldestAgeSeconds = float64(oldest) / 1000
		o.States = append(o.States, f)
	}

	if r.Ledger.Config().WatchTable != "" {
		n, q, err := tasklist.WatchPending(ctx, r.Ledger)
		o.Cost.Queries += q
		if err != nil {
			return Overview{}, err
		}
		o.Watch = &WatchFigures{Pending: n}
	}

	cursor := ""
	for page := 0; ; page++ {
		if page == MaxReviewPages {
			o.Reviews.Truncated = true
			break
		}
		items, next, err := tasklist.ListOpenReviews(ctx, r.Ledger, 100, cursor)
		o.Cost.Queries++
		if err != nil {
			return Overview{}, err
		}
		for _, it := range items {
			o.Reviews.Open++
			reason := it.Reason
			if reason == "" {
				reason = "unknown"
			}
			o.Reviews.ByReason[reason]++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if r.Rates != nil {
		rv := r.Rates.View()
		o.Rates = &rv
	}
	return o, nil
}
