package soak

import (
	"fmt"
	"time"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination"
	dsim "github.com/taskledger/taskledger/internal/destination/simulated"
)

// Deliver tasks in the soak (DESIGN §10): direct deliver submits to three
// simulated destinations, none of them idempotent — notify (readback by
// operation id, "not found" credible), crm (declared without readback) and
// publish (readback by canonical URL that shows a delivery only
// publishReadbackDelay after it happened, so "not found" is not credible).

// isDeliver reports whether k's tasks are deliver tasks.
func isDeliver(k Kind) bool {
	switch k {
	case DeliverOK, DeliverLoseReply, DeliverNoReadback, DeliverLaggingReadback:
		return true
	}
	return false
}

// destinationOf is the destination a deliver kind's tasks name.
func destinationOf(k Kind) string {
	switch k {
	case DeliverNoReadback:
		return dsim.CRM
	case DeliverLaggingReadback:
		return dsim.Publish
	}
	return dsim.Notify
}

// deliverInput is the deliver input of task i of kind k.
func deliverInput(k Kind, i int) string {
	var params string
	switch destinationOf(k) {
	case dsim.CRM:
		params = fmt.Sprintf(`{"client_reference":"soak-%d"}`, i)
	case dsim.Publish:
		params = fmt.Sprintf(`{"slug":"soak-%d"}`, i)
	default:
		params = fmt.Sprintf(`{"to":"soak-%d@example.com"}`, i)
	}
	return fmt.Sprintf(`{"destination":%q,"params":%s,"payload":{"soak_task":%d}}`, destinationOf(k), params, i)
}

// destinations builds the soak's simulated destinations and scripts the
// faults of the deliver kinds.
// extra are further destinations (the follow-up kinds').
func (s *soak) destinations(extra ...destination.Destination) (*deliver.Registry, error) {
	none := destination.Guarantees{Readback: destination.ReadbackNone}
	notify, err := dsim.New(dsim.Notify, dsim.Options{Seed: s.cfg.Seed})
	if err != nil {
		return nil, err
	}
	crm, err := dsim.New(dsim.CRM, dsim.Options{Seed: s.cfg.Seed, Guarantees: &none})
	if err != nil {
		return nil, err
	}
	publish, err := dsim.New(dsim.Publish, dsim.Options{Seed: s.cfg.Seed, ReadbackDelay: s.publishDelay()})
	if err != nil {
		return nil, err
	}
	for _, t := range s.tasks {
		switch t.kind {
		case DeliverLoseReply, DeliverNoReadback, DeliverLaggingReadback:
			for _, d := range []*dsim.Destination{notify, crm, publish} {
				if d.Name() == destinationOf(t.kind) {
					d.Script(t.id, dsim.AcceptLoseReply)
				}
			}
		}
	}
	return deliver.NewRegistry(append([]destination.Destination{notify, crm, publish}, extra...)...)
}

// publishDelay is how long after a publication its readback shows it:
// twice the reconcilers' Settle, so the first readback usually misses it.
func (s *soak) publishDelay() time.Duration { return 2 * reconcileSettle }
