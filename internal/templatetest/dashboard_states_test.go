package templatetest

import (
	"regexp"
	"slices"
	"testing"

	"github.com/taskledger/taskledger/pkg/ledger"
)

var liveMetricStateRe = regexp.MustCompile(`\["taskledger", "(LiveTasks|OldestTaskAge)", "Function", "reconciler", "State", "([a-z_]+)"`)

// TestDashboardPlotsTheStatesTheReconcilerEmits: DESIGN §1.6 and §7 — an
// operator reads the live tasks and the oldest task's age per state from
// the console. The reconciler emits LiveTasks and OldestTaskAge per
// by_state partition (ledger.Partitions: queued and running together as
// "active"); a dashboard line for a State value it never emits stays empty,
// and a partition without a line is invisible (a backlog of queued tasks
// would show nowhere).
func TestDashboardPlotsTheStatesTheReconcilerEmits(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	ids := tpl.LogicalIDs("AWS::CloudWatch::Dashboard")
	if len(ids) != 1 {
		t.Fatalf("dashboards: %v, want one", ids)
	}
	p, _ := tpl.Resource(ids[0])
	sub, _ := p["DashboardBody"].(map[string]any)
	body, _ := sub["Fn::Sub"].(string)
	plotted := map[string][]string{}
	for _, m := range liveMetricStateRe.FindAllStringSubmatch(body, -1) {
		plotted[m[1]] = append(plotted[m[1]], m[2])
	}
	for _, metric := range []string{"LiveTasks", "OldestTaskAge"} {
		got := plotted[metric]
		for _, st := range ledger.Partitions {
			if !slices.Contains(got, string(st)) {
				t.Errorf("%s: the reconciler emits State=%s, the dashboard does not plot it (plots %v)", metric, st, got)
			}
		}
		for _, st := range got {
			if !slices.Contains(ledger.Partitions, ledger.State(st)) {
				t.Errorf("%s: the dashboard plots State=%s, which the reconciler never emits", metric, st)
			}
		}
	}
}
