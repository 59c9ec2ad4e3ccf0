package overview

// WatchFigures count the submitted tasks the reconciler has not checked
// yet (pkg/ledger/watch.go): their watch items past each shard's cursor.
// Such a task is queued or running (unless it ended meanwhile) and in no
// by_state count until the reconciler reads its watch item at its
// dispatch deadline and, finding it still live, adopts it; so the active
// count leaves out about the last dispatch timeout's submissions.
type WatchFigures struct {
	// Pending: submitted, not yet checked. It includes tasks that ended
	// before their check (their watch item is read all the same).
	Pending int `json:"pending"`
}
