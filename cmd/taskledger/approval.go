package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// decisionView is what approve, reject and withdraw print: the task, its
// approval and its deliveries.
type decisionView struct {
	*opsapi.Task
	ResultSHA256 string             `json:"result_sha256,omitempty"`
	Decision     map[string]string  `json:"approval"`
	Deliveries   []api.DeliveryView `json:"deliveries"`
	Replayed     bool               `json:"replayed,omitempty"`
}

// decide runs `taskledger approve|reject|withdraw <id>` straight against
// the tables: the same ledger transactions as the HTTP API, decided_by
// "operator:<--by>", policy operator_cli.
func (a *app) decide(ctx context.Context, c *command) error {
	verb := c.pos[0]
	if len(c.pos) != 2 {
		return usageErr("%s needs exactly one task id", verb)
	}
	if strings.TrimSpace(c.by) == "" {
		return usageErr("--by is required (no $USER to default to)")
	}
	if verb == "approve" && !validSHA(c.sha) {
		return usageErr("approve needs --artifact-sha256: the 64 lowercase hex characters of the result_sha256 you approve")
	}
	if verb != "approve" && (c.sha != "" || c.edited != "") {
		return usageErr("--artifact-sha256 and --edited-result belong to approve")
	}
	// Only approve and withdraw notify: an unparsable value must not stop
	// a reject (or any other command) that tells nobody.
	var notify *followup.Config
	if verb != "reject" {
		n, err := followup.Parse(a.env(followup.EnvVar))
		if err != nil {
			return usageErr("%v", err)
		}
		notify = n
	}
	d, err := a.connect(ctx, &c.opts, false)
	if err != nil {
		return err
	}
	d.notify = notify
	id, by := c.pos[1], "operator:"+c.by
	t, err := d.ledger.Get(ctx, id)
	if err != nil {
		return err
	}
	if !t.ApprovalRequired {
		return fmt.Errorf("task %s has no approval gate; nothing to %s", id, verb)
	}
	var replay bool
	switch verb {
	case "approve":
		req, rerr := api.ApproveAsOperator(t, c.sha, c.edited, by, c.note, time.Now())
		if rerr != nil {
			return rerr
		}
		// The approval completes the task: its requester is told in the
		// same transaction, as through the API.
		req.FollowUps = d.notify.Approved(t)
		t, replay, err = d.ledger.Approve(ctx, t, req)
		if err == nil && !replay && d.sender != nil {
			for _, did := range t.DeliveryIDs {
				if serr := d.sender.Send(ctx, did, t.CorrelationID, 0); serr != nil {
					fmt.Fprintf(a.stderr, "delivery %s: send failed (%v); the reconciler re-sends it\n", did, serr)
				}
			}
		}
	case "reject":
		t, replay, err = d.ledger.Reject(ctx, t, by, c.note, api.OperatorPolicy)
	case "withdraw":
		t, err = d.ledger.Withdraw(ctx, id, by, c.note, api.OperatorPolicy, d.notify.Withdrawn)
	}
	var ac *ledger.ArtifactChangedError
	var se *ledger.DeliveriesStartedError
	switch {
	case errors.As(err, &ac):
		return fmt.Errorf("artifact changed: task %s's result is %s, not %s; nothing was changed", id, ac.CurrentSHA256, c.sha)
	case errors.As(err, &se):
		var names []string
		for _, s := range ledger.Started(se.Deliveries) {
			names = append(names, s.TaskID+" ("+string(s.State)+")")
		}
		return fmt.Errorf("cannot withdraw: deliveries already started: %s; nothing was changed", strings.Join(names, ", "))
	case err != nil:
		return err
	}
	if d.notify == nil && verb != "reject" && !replay {
		fmt.Fprintf(a.stderr, "%s: nobody was notified: %s names no one (give the CLI the value the stack's functions run with)\n", id, followup.EnvVar)
	}
	ds, err := d.ledger.Deliveries(ctx, append(append([]string{}, t.DeliveryIDs...), t.WithdrawnDeliveryIDs...))
	if err != nil {
		return err
	}
	v := decisionView{Task: opsapi.ViewTask(t), ResultSHA256: t.ResultSHA256, Replayed: replay,
		Decision: map[string]string{"state": t.ApprovalState, "artifact_sha256": t.ApprovalSHA256, "decided_by": t.DecidedBy,
			"decided_at": t.DecidedAt, "note": t.ApprovalNote, "policy": t.ApprovalPolicy},
		Deliveries: api.DeliveryViews(ds)}
	if c.opts.json {
		return writeJSON(a.stdout, v)
	}
	printDecision(a.stdout, verb, v)
	return nil
}

func printDecision(w io.Writer, verb string, v decisionView) {
	if v.Replayed {
		fmt.Fprintf(w, "%s: already %s; nothing changed\n", v.TaskID, map[string]string{"approve": "approved", "reject": "rejected"}[verb])
	}
	printTask(w, v.Task)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "result sha256\t%s\n", v.ResultSHA256)
	fmt.Fprintf(tw, "approval\t%s by %s at %s\n", v.Decision["state"], v.Decision["decided_by"], seconds(v.Decision["decided_at"]))
	for _, d := range v.Deliveries {
		fmt.Fprintf(tw, "delivery\t%s %s %s\n", d.TaskID, d.Destination, d.State)
	}
	tw.Flush()
}

func validSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
