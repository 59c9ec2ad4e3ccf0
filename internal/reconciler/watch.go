package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// watch is a run's first phase when the ledger has a watch table
// (ledger.Config.WatchTable; pkg/ledger/watch.go): per shard, the watch
// items that came due since the shard's cursor, in order, each task read
// consistently (an eventually consistent read could miss a task just put,
// and a task whose message was lost would then never be found). A task
// still queued or running and not in by_state is adopted into it; the walk
// that follows applies its rule among every other due task's, so a flood
// of submissions cannot take the run's MaxPerRun from the rest. One that
// ended or is indexed needs nothing; one absent is read once more, a
// dispatch timeout later (recheck), and then needs nothing (its submit
// failed between the two puts). The cursor moves past an item only once
// its task was handled so: a failed read or write stops the shard there,
// for the next run to repeat. The phase takes at most half the run's
// work budget (a backlog of watch items after an outage must leave the
// walk its turn).
func (r *run) watch(ctx context.Context) {
	l := r.h.Ledger
	if l.Config().WatchTable == "" {
		return
	}
	r.watchUntil = r.start.Add(r.workUntil.Sub(r.start) / 2)
	cursors, _, err := tasklist.WatchCursors(ctx, l)
	if err != nil {
		r.fail(ctx, "read watch cursors", err)
		return
	}
	sem := make(chan struct{}, intOr(r.h.Concurrency, DefaultConcurrency))
	var wg sync.WaitGroup
	for shard := range l.Config().Shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r.watchShard(ctx, shard, cursors[shard])
		})
	}
	wg.Wait()
}

// watchShard reads one shard's due watch items after cursor and moves its
// cursor past those handled.
func (r *run) watchShard(ctx context.Context, shard int, cursor string) {
	l := r.h.Ledger
	cfg := l.Config()
	// Every sk due at or before now sorts under hi.
	pk, hi := ledger.WatchKey(shard, r.now.UnixMilli()+1, "")
	if cursor >= hi { // a run whose clock is behind the one that moved the cursor
		return
	}
	cond, vals := "pk = :pk AND sk < :hi", map[string]types.AttributeValue{":pk": attr(pk), ":hi": attr(hi)}
	if cursor != "" { // a key condition takes no empty string
		cond, vals[":lo"] = "pk = :pk AND sk BETWEEN :lo AND :hi", attr(cursor)
	}
	at := cursor
	defer func() {
		if at != cursor {
			r.advance(ctx, shard, at)
		}
	}()
	var start map[string]types.AttributeValue
	for {
		if ctx.Err() != nil || !time.Now().Before(r.watchUntil) {
			r.count(func(s *Summary) { s.Partial = true })
			return
		}
		out, err := l.DB().Query(ctx, &dynamodb.QueryInput{
			TableName:                 &cfg.WatchTable,
			KeyConditionExpression:    aws.String(cond),
			ExpressionAttributeValues: vals,
			ConsistentRead:            aws.Bool(true),
			Limit:                     aws.Int32(r.h.pageLimit()),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			r.fail(ctx, "query watch", err, "shard", shard)
			return
		}
		var sks, ids []string
		var rechecks []bool
		for _, it := range out.Items {
			sk, id := attrS(it, "sk"), attrS(it, "task_id")
			if sk > cursor && sk < hi && id != "" {
				sks, ids, rechecks = append(sks, sk), append(ids, id), append(rechecks, it["recheck"] != nil)
			}
		}
		tasks, err := tasklist.ReadTasks(ctx, l, ids, true)
		if err != nil {
			r.fail(ctx, "read watched tasks", err, "shard", shard)
			return
		}
		for i, id := range ids {
			ok := r.watched(ctx, tasks[id])
			if ok && tasks[id] == nil && !rechecks[i] {
				ok = r.recheck(ctx, shard, sks[i], id)
			}
			if !ok {
				return
			}
			at = sks[i]
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return
		}
	}
}

// recheck puts, for a task found absent at its watch item's due time (sk),
// a second watch item a dispatch timeout later, marked so that it is read
// once: the submit may have failed between its two puts, or its task put
// may still land — a request the server performs after its caller gave
// up, or one from a submitter whose clock is behind the reconciler's. It
// reports whether the item was put (else the cursor stays before sk).
func (r *run) recheck(ctx context.Context, shard int, sk, id string) bool {
	cfg := r.h.Ledger.Config()
	due, rest, _ := strings.Cut(sk, "#") // rest: "<task id>#<nonce>"
	n, err := strconv.ParseInt(due, 10, 64)
	if err != nil {
		return true // not a watch item's key: nothing to read again
	}
	at := time.UnixMilli(n).Add(cfg.DispatchTimeout)
	pk, nsk := ledger.WatchKey(shard, at.UnixMilli(), rest)
	_, err = r.h.Ledger.DB().UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &cfg.WatchTable,
		Key:                      map[string]types.AttributeValue{"pk": attr(pk), "sk": attr(nsk)},
		UpdateExpression:         aws.String("SET #id = :id, #exp = :exp, #recheck = :yes"),
		ExpressionAttributeNames: map[string]string{"#id": "task_id", "#exp": "expires_at", "#recheck": "recheck"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": attr(id), ":yes": &types.AttributeValueMemberBOOL{Value: true},
			":exp": &types.AttributeValueMemberN{Value: strconv.FormatInt(at.Add(ledger.WatchRetention).Unix(), 10)}},
	})
	if err != nil {
		r.fail(ctx, "put watch recheck", err, "task_id", id, "shard", shard)
		return false
	}
	return true
}

// watched handles one watched task (nil: absent) and reports whether it
// was handled, so the cursor may move past it.
func (r *run) watched(ctx context.Context, t *ledger.Task) bool {
	r.count(func(s *Summary) { s.Watched++ })
	if !unindexed(t) {
		return true
	}
	nt, ok, err := r.adopt(ctx, t)
	if ok && r.h.Due(nt, r.now) {
		r.mu.Lock()
		r.adopted[nt.TaskID] = nt
		r.mu.Unlock()
	}
	return err == nil
}

// sweep applies the rule of each due task the watch adopted that the walk
// did not reach because the eventually consistent index did not show its
// new entry yet (DynamoDB; the emulators show it at once), within what is
// left of the run's MaxPerRun and work budget: a lost send near its age
// deadline is then handled in this run, not the next.
func (r *run) sweep(ctx context.Context) {
	for id, t := range r.adopted {
		switch {
		case r.walked[id]:
			continue
		case ctx.Err() != nil || !r.workLeft() || r.sum.Examined >= intOr(r.h.MaxPerRun, DefaultMaxPerRun):
			r.count(func(s *Summary) { s.Partial = true })
			return
		}
		r.apply(ctx, id, t, nil)
	}
}

// unindexed reports whether t is a watched task not yet in by_state:
// queued or running without state_shard (every other write into a live
// state indexes it).
func unindexed(t *ledger.Task) bool {
	return t != nil && t.StateShard == "" && (t.State == ledger.StateQueued || t.State == ledger.StateRunning)
}

// adopt puts t, queued or running and not in by_state, into it
// (ledger.Adopt); ok=false: t had moved on, nothing is left to do.
func (r *run) adopt(ctx context.Context, t *ledger.Task) (*ledger.Task, bool, error) {
	nt, ok, err := r.h.Ledger.Adopt(ctx, t)
	switch {
	case err != nil:
		r.fail(ctx, "adopt watched task", err, "task_id", t.TaskID)
	case ok:
		r.count(func(s *Summary) { s.Adopted++ })
	}
	return nt, ok, err
}

// advance moves shard's cursor to at, never back: two runs at once each
// move it only past items they handled, and the further one stands.
func (r *run) advance(ctx context.Context, shard int, at string) {
	cfg := r.h.Ledger.Config()
	_, err := r.h.Ledger.DB().UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &cfg.WatchTable,
		Key:                       map[string]types.AttributeValue{"pk": attr(ledger.CursorPK), "sk": attr(fmt.Sprintf("%02d", shard))},
		UpdateExpression:          aws.String("SET #at = :at"),
		ConditionExpression:       aws.String("attribute_not_exists(#at) OR #at < :at"),
		ExpressionAttributeNames:  map[string]string{"#at": "at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": attr(at)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		r.fail(ctx, "advance watch cursor", err, "shard", shard)
	}
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attr(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// pending counts the watch items no run has read yet
// (tasklist.WatchPending): the submissions of about the last dispatch
// timeout, queued or running unless they ended meanwhile. -1: no watch
// table, or a read failed.
func (r *run) pending(ctx context.Context) int {
	if r.h.Ledger.Config().WatchTable == "" {
		return -1
	}
	n, _, err := tasklist.WatchPending(ctx, r.h.Ledger)
	if err != nil {
		r.fail(ctx, "count watch items", err)
		return -1
	}
	return n
}
