package demo

import (
	"fmt"
	"io"
	"strings"
)

// Print writes r readably: one block per scenario, each case's task and
// approval, then each delivery's receipt (every DESIGN §10 field) and what
// the destination itself recorded, then the checks that held.
func Print(w io.Writer, r *Result, err error) {
	status := "PASS"
	if err != nil {
		status = "FAIL"
	}
	fmt.Fprintf(w, "\n=== seed %s — %s: %s\n", r.ID, r.Title, status)
	for _, c := range r.Cases {
		fmt.Fprintf(w, "  case: %s\n", c.Label)
		if v := c.Task; v != nil {
			fmt.Fprintf(w, "    task             %s  %s  state %s\n", v.TaskID, v.Kind, v.State)
			fmt.Fprintf(w, "    result_sha256    %s\n", v.ResultSHA256)
			if a := v.Approval; a != nil {
				fmt.Fprintf(w, "    approval         %s by %q at %s, policy %q, note %q\n", a.State, a.DecidedBy, a.DecidedAt, a.Policy, a.Note)
			}
		}
		for _, d := range c.Deliveries {
			r := d.Receipt
			fmt.Fprintf(w, "    delivery %s → %s: %s\n", d.TaskID, r.Destination, d.State)
			if d.State != "completed" {
				fmt.Fprintf(w, "      side effects at the destination: %d\n", c.Effects[d.TaskID])
				continue
			}
			rows := [][2]string{
				{"operation_id", r.OperationID},
				{"payload_sha256", r.PayloadSHA256},
				{"destination", r.Destination},
				{"destination_identity", r.DestinationIdentity},
				{"provider_ref", r.ProviderRef},
				{"public_url", r.PublicURL},
				{"readback_at", r.ReadbackAt},
				{"readback_result", r.ReadbackResult},
				{"approved_by", r.ApprovedBy},
				{"approved_at", r.ApprovedAt},
				{"policy", r.Policy},
			}
			fmt.Fprintf(w, "      receipt\n")
			for _, row := range rows {
				val := row[1]
				if val == "" {
					val = "—"
				}
				fmt.Fprintf(w, "        %-21s %s\n", row[0], val)
			}
			fmt.Fprintf(w, "      side effects at the destination: %d\n", c.Effects[d.TaskID])
		}
		for _, ch := range c.Checks {
			fmt.Fprintf(w, "    ✓ %s\n", ch)
		}
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "; ") {
			fmt.Fprintf(w, "    ✗ %s\n", line)
		}
	}
}
