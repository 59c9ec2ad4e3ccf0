// Package tasklist reads the lists people see of a ledger's tasks: a
// caller's own tasks, newest first (ListByOwner, the by_owner index); the
// tasks awaiting a decision an approver may make, oldest deadline first
// (ListAwaitingApproval, a merge of the by_state shards); and a caller's
// tasks in one conversation, oldest first (ConversationTasks, the
// by_conversation index).
//
// These are read models, not protocol: nothing here writes, and every
// decision on a task reads it again through the ledger. A list reads its
// index, then the tasks themselves (BatchGetItem, eventually consistent:
// a list may lag a write by a moment), and checks each item again — its
// scope, its state, its conversation — so no index lag shows another
// caller's task. Each call's reads are bounded; a page may end early with
// a cursor to continue.
//
// The reconciler's reads of the same kind live here too: ReadTasks (a
// batch of tasks, consistently when a decision follows); one shard of the
// sparse by_state index, in due_at order or counted (QueryLive, LiveRef,
// CountLive); the open review items, oldest first (ListOpenReviews, the
// open_reviews index); and the watch table's cursors and pending count
// (WatchCursors, WatchPending). The overview, the operators' review list
// and the make-run status line read the same.
//
// The cursors of ListByOwner and ListAwaitingApproval are opaque and
// signed (cursor.go): one is only ever accepted back by the same list for
// the same viewer, and a refused one is ErrBadCursor (wrapped). Those of
// QueryLive and ListOpenReviews are the Query's last key (keycursor.go);
// a malformed one is ErrBadCursor. Throttles are *ledger.ThrottledError,
// as from the ledger.
package tasklist
