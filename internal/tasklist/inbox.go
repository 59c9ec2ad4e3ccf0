package tasklist

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// InboxQuery selects a page of the tasks awaiting approval that a viewer
// may decide, oldest deadline first.
type InboxQuery struct {
	// Viewer is the caller's scope: the cursor is bound to it.
	Viewer string
	// Keep says whether the viewer may decide t (a task read from the
	// table, awaiting approval). nil: the viewer may decide nothing — the
	// cursor is checked and nothing is read.
	Keep func(t *ledger.Task) bool
	// Limit is the most tasks returned (1..MaxListLimit).
	Limit int
	// Cursor is the Next of the previous page ("" for the first).
	Cursor string
}

// inboxPageSize is the entries one QueryLive of a shard asks for.
const inboxPageSize = 25

// inboxPos is an inbox cursor's position: the last entry examined, in
// (due_at, task_id) order across all shards, and where each shard's
// reading resumes: absent, its first page; "-", nothing left; else the
// QueryLive cursor of the page to read again (its entries up to the
// position are skipped).
type inboxPos struct {
	Due    int64             `json:"d,omitempty"`
	ID     string            `json:"i,omitempty"`
	Shards map[string]string `json:"s,omitempty"`
}

func (p inboxPos) before(r LiveRef) bool {
	return p.ID == "" || r.DueAt > p.Due || r.DueAt == p.Due && r.TaskID > p.ID
}

// inboxShard is one shard's reading during a call.
type inboxShard struct {
	start        string    // QueryLive cursor of the page held ("" = first page)
	refs         []LiveRef // its entries after the position, in order
	next         string    // QueryLive cursor after that page ("" = last page)
	loaded, done bool
}

// ListAwaitingApproval returns a page of the tasks awaiting approval that
// q.Keep accepts, by approval deadline (due_at), oldest first. It merges
// every shard of the live index (QueryLive, State awaiting_approval: only
// TaskID and DueAt of an entry are used), reads the tasks themselves
// (BatchGetItem, eventually consistent) and keeps those still awaiting
// approval that q.Keep accepts. One call makes at most 2×Shards+8 queries
// and reads at most MaxListReads tasks; a page may end early, with a
// cursor. A task whose deadline sorts before the position when it arrives
// (a withdrawal puts a task back with its old deadline) is not shown on
// later pages of a walk already past it.
//
// Errors: ErrBadCursor (wrapped), *ledger.ThrottledError.
func (r *Reader) ListAwaitingApproval(ctx context.Context, q InboxQuery) (Page, error) {
	if q.Viewer == "" || q.Limit < 1 || q.Limit > MaxListLimit {
		return Page{}, fmt.Errorf("tasklist: ListAwaitingApproval needs a Viewer and a Limit of 1..%d", MaxListLimit)
	}
	var pos inboxPos
	if err := r.openCursor("inbox", q.Viewer, q.Cursor, &pos); err != nil {
		return Page{}, err
	}
	if q.Keep == nil {
		return Page{}, nil
	}
	shards := make([]inboxShard, r.cfg.Shards)
	for k, v := range pos.Shards {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n >= len(shards) {
			return Page{}, fmt.Errorf("%w: shard %q", ErrBadCursor, k)
		}
		shards[n].start, shards[n].done = v, v == "-"
	}
	queries, maxQueries := 0, 2*len(shards)+8
	// fill gives shard s a head entry unless it has none left; false when
	// the query budget is spent first.
	fill := func(s int) (bool, error) {
		sh := &shards[s]
		for !sh.done && len(sh.refs) == 0 {
			if sh.loaded && sh.next == "" {
				sh.done = true
				break
			}
			if queries == maxQueries {
				return false, nil
			}
			if sh.loaded {
				sh.start = sh.next
			}
			refs, next, err := QueryLive(ctx, r.led, LiveQuery{State: ledger.StateAwaitingApproval, Shard: s, Limit: inboxPageSize, Cursor: sh.start})
			if err != nil {
				return false, err
			}
			queries++
			sh.loaded, sh.next, sh.refs = true, next, sh.refs[:0]
			for _, r := range refs {
				if pos.before(r) {
					sh.refs = append(sh.refs, r)
				}
			}
			slices.SortFunc(sh.refs, func(a, b LiveRef) int {
				return cmp.Or(cmp.Compare(a.DueAt, b.DueAt), cmp.Compare(a.TaskID, b.TaskID))
			})
		}
		return true, nil
	}
	// take returns up to n entries in (due_at, task_id) order, moving the
	// position past each.
	take := func(n int) ([]LiveRef, error) {
		var out []LiveRef
		for len(out) < n {
			best := -1
			for s := range shards {
				ok, err := fill(s)
				if err != nil || !ok {
					return out, err
				}
				if h := shards[s].refs; len(h) > 0 && (best < 0 || h[0].DueAt < shards[best].refs[0].DueAt ||
					h[0].DueAt == shards[best].refs[0].DueAt && h[0].TaskID < shards[best].refs[0].TaskID) {
					best = s
				}
			}
			if best < 0 {
				break
			}
			r := shards[best].refs[0]
			shards[best].refs = shards[best].refs[1:]
			pos.Due, pos.ID = r.DueAt, r.TaskID
			out = append(out, r)
		}
		return out, nil
	}
	var out []*ledger.Task
	reads := 0
	for len(out) < q.Limit && reads < MaxListReads {
		refs, err := take(min(q.Limit-len(out), MaxListReads-reads))
		if err != nil {
			return Page{}, err
		}
		if len(refs) == 0 {
			break
		}
		ids := make([]string, len(refs))
		for i, r := range refs {
			ids[i] = r.TaskID
		}
		tasks, err := r.getTasks(ctx, ids)
		if err != nil {
			return Page{}, err
		}
		reads += len(ids)
		for _, id := range ids {
			if t := tasks[id]; t != nil && t.State == ledger.StateAwaitingApproval && q.Keep(t) {
				out = append(out, t)
			}
		}
	}
	pos.Shards = map[string]string{}
	more := false
	for s, sh := range shards {
		switch {
		case sh.done && len(sh.refs) == 0, sh.loaded && len(sh.refs) == 0 && sh.next == "":
			pos.Shards[strconv.Itoa(s)] = "-"
		case sh.start != "":
			pos.Shards[strconv.Itoa(s)] = sh.start
			more = true
		default:
			more = true
		}
	}
	if !more {
		return Page{Tasks: out}, nil
	}
	c, err := r.sealCursor("inbox", q.Viewer, pos)
	return Page{Tasks: out, Next: c}, err
}
