package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// summaryWidth caps the SUMMARY column of review list.
const summaryWidth = 90

func printReviews(w io.Writer, items []ledger.Review) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no open review items")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK_ID\tREASON\tATTEMPTS\tDEAD_LETTERED_AT\tSUMMARY")
	for _, r := range items {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.TaskID, r.Reason, r.Attempts, seconds(r.DeadLetteredAt), oneLine(shortSummary(r), summaryWidth))
	}
	tw.Flush()
}

func printReview(w io.Writer, r *ledger.Review) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("review", r.TaskID+" ("+r.ReviewStatus+")")
	row("reason", r.Reason)
	row("summary", oneLine(r.Summary, 0))
	row("parked at", fmt.Sprintf("%s (park count %d)", seconds(r.DeadLetteredAt), r.ParkCount))
	if r.TaskState != "" {
		row("task was", fmt.Sprintf("%s, %d attempt(s)", r.TaskState, r.Attempts))
	}
	if r.ErrorClass != "" {
		row("error", strings.TrimSuffix(r.ErrorClass+": "+oneLine(r.ErrorMessage, 200), ": "))
	}
	row("provider ref", r.ProviderRef)
	row("correlation", r.CorrelationID)
	if r.MessageID != "" {
		row("message", fmt.Sprintf("%s, %d bytes, sha256 %s", r.MessageID, r.BodyBytes, r.BodySHA256))
	}
	if r.ReviewStatus == ledger.ReviewResolved {
		row("resolution", fmt.Sprintf("%s by %s at %s", r.Resolution, r.ResolvedBy, seconds(r.ResolvedAt)))
		row("note", oneLine(r.ResolutionNote, 0))
	}
	tw.Flush()
	list := func(title string, xs []string) {
		fmt.Fprintf(w, "\n%s:\n", title)
		if len(xs) == 0 {
			fmt.Fprintln(w, "  (none)")
		}
		for _, x := range xs {
			fmt.Fprintf(w, "  - %s\n", x)
		}
	}
	list("known", r.Known)
	list("uncertain", r.Uncertain)
	list("safe actions", r.SafeActions)
}

func printTask(w io.Writer, t *opsapi.Task) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("task", t.TaskID)
	row("state", string(t.State))
	row("kind", t.Kind)
	row("attempts", fmt.Sprintf("%d of %d (assignment version %d)", t.Attempts, t.MaxAttempts, t.AssignmentVersion))
	row("created", seconds(t.CreatedAt))
	row("updated", seconds(t.UpdatedAt))
	row("deadline", seconds(t.Deadline))
	if t.LeaseOwner != "" || t.LeaseUntil != "" {
		row("lease", fmt.Sprintf("%s until %s", t.LeaseOwner, seconds(t.LeaseUntil)))
	}
	row("not before", seconds(t.NotBefore))
	if t.Dispatches > 0 {
		row("re-sent", fmt.Sprintf("%d time(s) by the reconciler", t.Dispatches))
	}
	row("parent", t.ParentTaskID)
	row("correlation", t.CorrelationID)
	if t.Error != nil {
		row("error", strings.TrimSuffix(t.Error.Class+": "+oneLine(t.Error.Message, 200), ": "))
	}
	if t.Receipt != nil {
		rc := t.Receipt
		row("provider", strings.TrimSpace(rc.Provider+" "+rc.ProviderRef))
		row("completed", seconds(rc.CompletedAt))
		row("readback", seconds(rc.ReadbackAt))
		if d := rc.Delivery; d != nil {
			row("destination", strings.TrimSpace(d.Destination+" "+d.DestinationIdentity))
			row("delivered sha256", d.PayloadSHA256)
			row("public url", d.PublicURL)
			row("readback result", d.ReadbackResult)
			if d.ApprovedBy != "" || d.ApprovedAt != "" || d.Policy != "" {
				row("approved", strings.TrimSpace(d.ApprovedBy+" "+seconds(d.ApprovedAt)+" "+d.Policy))
			} else {
				row("approved", "(direct deliver: no approval)")
			}
		}
	}
	if len(t.Result) > 0 {
		row("result", fmt.Sprintf("%d bytes (--json to print it)", len(t.Result)))
	}
	if r := t.ResultRef; r != nil {
		row("result", fmt.Sprintf("%d bytes at s3://%s/%s (sha256 %s)", r.Size, r.Bucket, r.Key, r.SHA256))
	}
	row("review", t.ReviewReason)
	tw.Flush()
}

func printAction(w, errw io.Writer, id string, act ledger.OperatorAction, res opsapi.ActionResult) {
	r := res.Review
	switch {
	case res.Replayed && r.ParkCount != act.ParkCount:
		fmt.Fprintf(w, "%s: already applied: the %s of park %d; nothing changed. The task was parked again since (park %d, review %s): taskledger review show %s\n",
			id, act.Resolution, act.ParkCount, r.ParkCount, r.ReviewStatus, id)
		return
	case res.Replayed:
		fmt.Fprintf(w, "%s: already applied: park %d resolved as %s by %s at %s; nothing changed\n", id, r.ParkCount, r.Resolution, r.ResolvedBy, seconds(r.ResolvedAt))
		return
	}
	fmt.Fprintf(w, "%s: decided park %d (to repeat this command safely, add --park %d)\n", id, act.ParkCount, act.ParkCount)
	switch r.Resolution {
	case ledger.ResolutionRetry:
		fmt.Fprintf(w, "%s: re-queued with a fresh budget by %s\n", id, r.ResolvedBy)
		if res.Dispatched != nil && !*res.Dispatched {
			fmt.Fprintf(errw, "warning: sending the task message failed; the reconciler will send it within its dispatch deadline\n")
		} else {
			fmt.Fprintln(w, "task message sent")
		}
	default:
		fmt.Fprintf(w, "%s: resolved as %s by %s\n", id, r.Resolution, r.ResolvedBy)
	}
	if res.Task != nil {
		fmt.Fprintf(w, "task state: %s\n", res.Task.State)
	}
}

// shortSummary drops the leading "Task <id>" the TASK_ID column repeats.
func shortSummary(r ledger.Review) string {
	s, ok := strings.CutPrefix(r.Summary, "Task "+r.TaskID)
	if !ok {
		return r.Summary
	}
	return strings.TrimLeft(s, ": ")
}

// seconds trims an RFC 3339 time to whole seconds for display.
func seconds(s string) string {
	if i := strings.IndexByte(s, '.'); i > 0 && strings.HasSuffix(s, "Z") {
		return s[:i] + "Z"
	}
	return s
}

// oneLine flattens whitespace and clips to n runes (n <= 0: no clip).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if n > 0 && len([]rune(s)) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}
