package deliver

import (
	"strconv"
	"strings"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// ProvenanceOf is where the deliver task t came from, as its destination
// is told (destination.Provenance): the provenance recorded when t was
// created. A deliver task recorded before provenance was — still queued
// at an upgrade — gets it from what it does record: its idempotency key
// "approval:<task>:<sha>:<index>[:r<round>]" (reserved for an approval's
// deliveries: a submit cannot use it) and its approval's decider, else its
// caller scope (a direct submit). nil when t is not a deliver task.
func ProvenanceOf(t *ledger.Task) *destination.Provenance {
	if t == nil || t.Kind != Kind {
		return nil
	}
	if p := t.Provenance; p != nil {
		return &destination.Provenance{Type: p.Type, TaskID: p.TaskID, ArtifactSHA256: p.ArtifactSHA256, DecidedBy: p.DecidedBy, Round: p.Round, Caller: p.Caller, Event: p.Event}
	}
	if rest, ok := strings.CutPrefix(t.IdempotencyKey, "approval:"); ok && t.ParentTaskID != "" {
		parts := strings.Split(rest, ":")
		p := &destination.Provenance{Type: destination.ProvenanceApproval, TaskID: t.ParentTaskID, DecidedBy: t.DecidedBy}
		if len(parts) >= 3 {
			p.ArtifactSHA256 = parts[1]
		}
		if len(parts) == 4 {
			if r, err := strconv.Atoi(strings.TrimPrefix(parts[3], "r")); err == nil {
				p.Round = r
			}
		}
		return p
	}
	return &destination.Provenance{Type: destination.ProvenanceDirect, Caller: t.Scope}
}
