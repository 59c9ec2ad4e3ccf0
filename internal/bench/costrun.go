package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/stack"
)

// CostResult is the cost comparison of one run.
type CostResult struct {
	Backend string
	Tasks   int
	// Rows: for each workload, taskledger before and after the
	// claim-check, the baseline, Step Functions and the promise's floor.
	Rows []CostRow
	// SFN is the Step Functions definition's happy path.
	SFN    ASLPath
	Prices Prices
	// Extras: the call-start mark and a heartbeat of ExtraWorkloads,
	// before and after the claim-check (extras.go).
	Extras []AttemptExtras
	// Pages: one page of GET /tasks and of GET /approvals (pages.go).
	Pages []PageCost
}

// Row returns the row of system and workload, if any.
func (c *CostResult) Row(system, workload string) (CostRow, bool) {
	for _, r := range c.Rows {
		if r.System == system && r.Workload == workload {
			return r, true
		}
	}
	return CostRow{}, false
}

// RunCost measures every workload of Workloads with tasks tasks each on
// taskledger and the baseline, prices Step Functions from its ASL and
// derives the floor of DESIGN §1 (floorCost).
func RunCost(ctx context.Context, b *soak.Backend, tasks int, progress func(string, ...any)) (*CostResult, error) {
	if tasks <= 0 {
		tasks = 5
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	path, err := WalkASL(StepFunctionsASL)
	if err != nil {
		return nil, err
	}
	mem := stack.MustLoadDefault().Functions()["WorkerFunction"].MemorySize
	res := &CostResult{Backend: b.Name, Tasks: tasks, SFN: path, Prices: PricesUSEast1}
	for _, w := range Workloads {
		progress("bench: cost, %s: taskledger", w.Name)
		tl, err := taskledgerCost(ctx, b, w, tasks, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.Name, err)
		}
		progress("bench: cost, %s: baseline", w.Name)
		base, err := baselineCost(ctx, b, w, tasks)
		if err != nil {
			return nil, fmt.Errorf("%s baseline: %w", w.Name, err)
		}
		progress("bench: cost, %s: taskledger with the S3 claim-check", w.Name)
		after, err := taskledgerCost(ctx, b, w, tasks, true)
		if err != nil {
			return nil, fmt.Errorf("%s after: %w", w.Name, err)
		}
		res.Rows = append(res.Rows, tl, after, base, stepFunctionsCost(w, base, path, mem), floorCost(w, mem))
		if !slices.Contains(ExtraWorkloads, w.Name) {
			continue
		}
		for _, plain := range []CostRow{tl, after} {
			progress("bench: cost, %s: %s, call-start mark and heartbeats", w.Name, plain.System)
			x, err := attemptExtras(ctx, b, w, tasks, plain.System == SystemAfter, plain)
			if err != nil {
				return nil, fmt.Errorf("%s extras (%s): %w", w.Name, plain.System, err)
			}
			res.Extras = append(res.Extras, x)
		}
	}
	progress("bench: cost, a page of GET /tasks and of GET /approvals")
	if res.Pages, err = pageCosts(ctx, b); err != nil {
		return nil, fmt.Errorf("list pages: %w", err)
	}
	return res, nil
}
