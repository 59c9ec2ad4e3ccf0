package bench_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/bench"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/soak"
	"github.com/taskledger/taskledger/internal/testenv"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// DynamoDB's, SQS's and Lambda's billing rules, as published.
func TestUnits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		before, after int
		tx            bool
		want          float64
	}{
		{0, 0, false, 1}, {0, 1, false, 1}, {0, 1024, false, 1}, {0, 1025, false, 2},
		{1055, 900, false, 2}, {900, 1055, false, 2}, // an update bills the larger of before and after
		{30967, 30967, false, 31}, {8975, 8975, false, 9}, // items measured for the cost targets
		{0, 1025, true, 4},
	} {
		if got := bench.WriteUnits(c.before, c.after, c.tx); !near(got, c.want) {
			t.Errorf("WriteUnits(%d, %d, %v) = %g, want %g", c.before, c.after, c.tx, got, c.want)
		}
	}
	for _, c := range []struct {
		size           int
		consistent, tx bool
		want           float64
	}{
		{0, true, false, 1}, {4096, true, false, 1}, {4097, true, false, 2},
		{100, false, false, 0.5}, {8192, false, false, 1}, {8192, true, true, 4},
	} {
		if got := bench.ReadUnits(c.size, c.consistent, c.tx); !near(got, c.want) {
			t.Errorf("ReadUnits(%d, consistent %v, tx %v) = %g, want %g", c.size, c.consistent, c.tx, got, c.want)
		}
	}
	for size, want := range map[int]float64{0: 1, 1: 1, 64 << 10: 1, 64<<10 + 1: 2, 256 << 10: 4} {
		if got := bench.SQSRequests(size); !near(got, want) {
			t.Errorf("SQSRequests(%d) = %g, want %g", size, got, want)
		}
	}
	for _, c := range []struct {
		ms   float64
		mem  int
		want float64
	}{
		{15, 256, 0.015 * 0.25}, {0.2, 1024, 0.001}, {1.5, 1024, 0.002}, {0, 512, 0.0005},
	} {
		if got := bench.LambdaGBSeconds(c.ms, c.mem); !near(got, c.want) {
			t.Errorf("LambdaGBSeconds(%g ms, %d MB) = %g, want %g", c.ms, c.mem, got, c.want)
		}
	}
	if f := bench.CriticalPathFloor(faultinject.DefaultLatency()); f != 35*time.Millisecond {
		t.Errorf("floor %s, want 3×5 ms + 2×10 ms", f)
	}
}

func TestUSDPerMillion(t *testing.T) {
	t.Parallel()
	p := bench.PricesUSEast1
	r := bench.CostRow{WRU: 3, RRU: 1, SQS: 3, S3Put: 1, S3Get: 2, Invocations: 2, GBSeconds: 0.01, Transitions: 4}
	want := 3*0.625 + 1*0.125 + 3*0.40 + 1*5 + 2*0.4 + 2*0.20 + 0.01*1e6*0.0000133334 + 4*25
	if got := r.USDPerMillion(p); math.Abs(got-want) > 1e-6 {
		t.Errorf("USD per million %.6f, want %.6f", got, want)
	}
	if got := (bench.CostRow{WRU: 3, NA: "n/a"}).USDPerMillion(p); got != 0 {
		t.Errorf("an n/a row costs %g", got)
	}
}

// The committed definition's happy path, counted by walking it.
func TestWalkASL(t *testing.T) {
	t.Parallel()
	p, err := bench.WalkASL(bench.StepFunctionsASL)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.States, ","); got != "Generate,WaitForApproval,Deliver,Done" || p.Transitions != 4 {
		t.Errorf("path %s, %d transitions", got, p.Transitions)
	}
	if p.LambdaInvokes != 2 || p.SQSTokenSends != 1 {
		t.Errorf("%d Lambda invocations, %d task-token sends; want 2 and 1", p.LambdaInvokes, p.SQSTokenSends)
	}
	choice := `{"StartAt":"A","States":{"A":{"Type":"Choice","Choices":[{"Next":"C"}],"Default":"B"},"B":{"Type":"Pass","End":true},"C":{"Type":"Fail"}}}`
	if p, err := bench.WalkASL([]byte(choice)); err != nil || p.Transitions != 2 || p.States[1] != "B" {
		t.Errorf("a Choice follows its Default: %+v, %v", p, err)
	}
	for name, def := range map[string]string{
		"missing state": `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"}}}`,
		"loop":          `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"},"B":{"Type":"Pass","Next":"A"}}}`,
		"no next":       `{"StartAt":"A","States":{"A":{"Type":"Pass"}}}`,
		"not json":      `{`,
	} {
		if _, err := bench.WalkASL([]byte(def)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// The cost comparison on the emulators: the call counts, units and rows
// have the shape and arithmetic the table claims. Never timings.
func TestCost(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		const tasks = 2
		res, err := bench.RunCost(ctx, &soak.Backend{Name: e.Backend, AWS: e.AWS}, tasks, nil)
		if err != nil {
			t.Fatal(err)
		}
		var table bytes.Buffer
		res.WriteTable(&table)
		if testing.Verbose() {
			t.Logf("\n%s", table.String())
		}
		if len(res.Rows) != 5*len(bench.Workloads) {
			t.Fatalf("%d rows, want 5 per workload (before, after, baseline, Step Functions, floor)\n%s", len(res.Rows), table.String())
		}
		row := func(system, workload string) bench.CostRow {
			t.Helper()
			r, ok := res.Row(system, workload)
			if !ok {
				t.Fatalf("no row %s / %s", system, workload)
			}
			return r
		}

		// Small tasks: exactly the call floor, one batch per task, no S3.
		small := row(bench.SystemBefore, "100 B input")
		want := map[string]float64{"DynamoDB.PutItem": 2, "DynamoDB.UpdateItem": 2, "SQS.SendMessage": 1, "SQS.ReceiveMessage": 1, "SQS.DeleteMessageBatch": 1}
		for op, n := range want {
			if !near(small.Calls[op], n) {
				t.Errorf("taskledger 100 B: %s %g per task, want %g", op, small.Calls[op], n)
			}
		}
		if len(small.Calls) != len(want) {
			t.Errorf("taskledger 100 B made other calls: %v", small.Calls)
		}
		if !near(small.Invocations, 2) || !near(small.SQS, 3) || small.S3Put+small.S3Get != 0 {
			t.Errorf("taskledger 100 B: %g invocations (want submit + worker), %g SQS requests (want 3), %g/%g S3", small.Invocations, small.SQS, small.S3Put, small.S3Get)
		}
		// A write also bills its global secondary indexes' updates
		// (DynamoDB developer guide, GSI.html#GSI.Writes: an item entering
		// an index one write, an item leaving it one; each at least one
		// unit). The submit puts a watch item (1 unit: a small item, the
		// watch table has no index) and then the task without by_state's
		// keys; the claim does not add them, so a task that completes
		// before its dispatch deadline bills no by_state unit. by_owner's
		// entry is put once, by the submit.
		if small.WRU != 3+1+1 {
			t.Errorf("taskledger 100 B: %g write units per task, want 5 (3 table writes of under 1 KB + the watch item + 1 by_owner)", small.WRU)
		}
		// by_owner (GET /tasks) holds only what the create's put writes:
		// exactly one index write per task, whatever the workload; by_state
		// none on this path.
		for _, r := range res.Rows {
			if r.NA != "" || (r.System != bench.SystemBefore && r.System != bench.SystemAfter) {
				continue
			}
			if !near(r.IndexWRU["by_owner"], 1) || r.IndexWRU["by_state"] != 0 {
				t.Errorf("%s / %s: index write units per task %v, want by_owner 1 and by_state 0", r.System, r.Workload, r.IndexWRU)
			}
			// The reconciler reads each completed task once at its
			// dispatch deadline (consistent: one unit per started 4 KB, 1
			// for an item under 4 KB, as every claim-checked one is) and
			// its watch item's share of a Query (a small item over 4 KB).
			units := math.Floor(r.WatchRRU)
			if share := r.WatchRRU - units; units < 1 || share <= 0 || share >= 0.1 || r.RRU < r.WatchRRU || (r.System == bench.SystemAfter && units != 1) {
				t.Errorf("%s / %s: the watch's reads %g units per task (of %g), want the task's read (1 after the claim-check) and a share of a Query under 0.1", r.System, r.Workload, r.WatchRRU, r.RRU)
			}
		}

		// Write units from item sizes: three writes of an item carrying the
		// input, one unit per started KB, plus the watch item and
		// by_owner's write (neither carries the input).
		for workload, kb := range map[string]float64{"8 KB input": 8, "30 KB input": 30} {
			r := row(bench.SystemBefore, workload)
			if r.WRU < 3*(kb+1)+2 || r.WRU > 3*(kb+3)+2 {
				t.Errorf("taskledger %s: %g write units per task, want 3 writes of %g–%g KB, the watch item and 1 index write", workload, r.WRU, kb+1, kb+3)
			}
		}
		big := row(bench.SystemBefore, "100 KB result")
		if big.WRU < 100+1+1+2 || big.WRU > 100+3+3+2 {
			t.Errorf("taskledger 100 KB result: %g write units, want a ≥100-unit completion plus two small writes, the watch item and 1 index write", big.WRU)
		}
		if r := row(bench.SystemBaseline, "100 KB result"); r.WRU < 101 || r.WRU > 104 {
			t.Errorf("baseline 100 KB result: %g write units, want the INPROGRESS put plus a ≥100-unit COMPLETED update", r.WRU)
		}
		if r := row(bench.SystemBaseline, "30 KB input"); !near(r.WRU, 2) {
			t.Errorf("baseline 30 KB: %g write units, want 2 (the record keeps only the payload's hash)", r.WRU)
		}

		// After the claim-check: the small task is unchanged (no S3 call),
		// a large input or result costs at most 8 write units (the cost
		// target) besides by_owner's one, and one S3 PUT, the input one GET.
		if r := row(bench.SystemAfter, "100 B input"); !near(r.WRU, small.WRU) || r.S3Put+r.S3Get != 0 || len(r.Calls) != len(want) {
			t.Errorf("taskledger after, 100 B: %g write units (before %g), %g/%g S3, calls %v", r.WRU, small.WRU, r.S3Put, r.S3Get, r.Calls)
		}
		for _, workload := range []string{"8 KB input", "30 KB input"} {
			if r := row(bench.SystemAfter, workload); r.WRU-r.IndexWRU["by_owner"] > 8 || !near(r.S3Put, 1) || !near(r.S3Get, 1) {
				t.Errorf("taskledger after, %s: %g write units (want ≤ 8), %g S3 PUT, %g S3 GET (want 1 and 1)", workload, r.WRU, r.S3Put, r.S3Get)
			}
		}
		if r := row(bench.SystemAfter, "100 KB result"); r.WRU-r.IndexWRU["by_owner"] > 8 || !near(r.S3Put, 1) {
			t.Errorf("taskledger after, 100 KB result: %g write units (want ≤ 8), %g S3 PUT (want 1)", r.WRU, r.S3Put)
		}

		// The document: impossible inline; the baseline goes through S3.
		if r := row(bench.SystemBefore, "1 MB document"); !strings.Contains(r.NA, "exceeds item limit") {
			t.Errorf("taskledger before, 1 MB document: %+v, want n/a", r)
		}
		doc := row(bench.SystemBaseline, "1 MB document")
		if !near(doc.S3Put, 1) || !near(doc.S3Get, 1) || !near(doc.Calls["S3.PutObject"], 1) {
			t.Errorf("baseline document: S3 %g PUT / %g GET, calls %v", doc.S3Put, doc.S3Get, doc.Calls)
		}
		// After: the claim-check's document flow (RunCost itself fails
		// unless every task's reply names its document's sha256 and size).
		// The item keeps a ~300 B reference per document: the claimed and
		// the completed item pass 1 KB, so the claim and the completion
		// bill up to one unit more each than the small task's (the
		// cost target of ≤ 8 covers inputs up to the 32 KB cap; the table
		// says so); S3: the intent PUT, the client's presigned
		// PUT, the CopyObject to inputs/ (PUT tier); HEADs (Resolve's,
		// Adopt's re-check of the upload and of the content address) and
		// reads (GET tier: the intent's read, Adopt's verification of the
		// copy, the worker's read, and on an emulator that keeps no
		// checksum Resolve's and Adopt's reads of the upload).
		after := row(bench.SystemAfter, "1 MB document")
		if after.NA != "" || after.WRU > small.WRU+2 {
			t.Errorf("taskledger after, 1 MB document: %q, %g write units (want at most the small task's %g + 2)", after.NA, after.WRU, small.WRU)
		}
		for op, n := range map[string]float64{"S3.PutObject": 1, "S3.PutObject (presigned, by the client)": 1, "S3.CopyObject": 1, "S3.HeadObject": 3,
			"DynamoDB.PutItem": 2, "DynamoDB.UpdateItem": 2, "SQS.SendMessage": 1} {
			if !near(after.Calls[op], n) {
				t.Errorf("taskledger after, 1 MB document: %s %g per task, want %g (calls %v)", op, after.Calls[op], n, after.Calls)
			}
		}
		if !near(after.S3Put, 3) || after.S3Get < 6 || after.S3Get > 8 || !near(after.Invocations, 3) {
			t.Errorf("taskledger after, 1 MB document: S3 %g PUT-tier (want 3) / %g GET-tier (want 6-8), %g invocations (want 2 submit + 1 worker)", after.S3Put, after.S3Get, after.Invocations)
		}

		// Step Functions: derived from the ASL walk and the baseline.
		for _, w := range bench.Workloads {
			sfn := row(bench.SystemSFN, w.Name)
			base := row(bench.SystemBaseline, w.Name)
			if !sfn.Derived || !near(sfn.Transitions, 4) || !near(sfn.WRU, base.WRU+2) || !near(sfn.Invocations, 2) {
				t.Errorf("SFN %s: %+v", w.Name, sfn)
			}
			if sfn.USDPerMillion(res.Prices) <= base.USDPerMillion(res.Prices) {
				t.Errorf("SFN %s costs no more than the baseline", w.Name)
			}
		}
		// The floor of DESIGN §1: derived; a small task's floor is DESIGN
		// §9's call floor; it is a lower bound of every measured taskledger
		// row (the promise kept), and the table calls the baseline target
		// unreachable exactly where the baseline bills less than it.
		if f := row(bench.SystemFloor, "100 B input"); !f.Derived || !near(f.WRU, 3) || !near(f.SQS, 3) || !near(f.Invocations, 2) || f.S3Put+f.S3Get != 0 ||
			!near(f.Calls["DynamoDB.PutItem"], 1) || !near(f.Calls["DynamoDB.UpdateItem"], 2) {
			t.Errorf("floor, 100 B: %+v; want 1 PutItem + 2 UpdateItem (3 write units), 3 SQS requests, 2 invocations, no S3", f)
		}
		if f := row(bench.SystemFloor, "1 MB document"); !near(f.S3Put, 1) || !near(f.S3Get, 2) || !near(f.Invocations, 3) {
			t.Errorf("floor, 1 MB document: %+v; want the client's PUT, a HEAD and a GET, 3 invocations", f)
		}
		for _, w := range bench.Workloads {
			f := row(bench.SystemFloor, w.Name).USDPerMillion(res.Prices)
			for _, system := range []string{bench.SystemBefore, bench.SystemAfter} {
				if r := row(system, w.Name); r.NA == "" && r.USDPerMillion(res.Prices) < f-1e-9 {
					t.Errorf("%s / %s costs %.4f, below the floor %.4f: the floor is not a floor", system, w.Name, r.USDPerMillion(res.Prices), f)
				}
			}
			after := row(bench.SystemAfter, w.Name).USDPerMillion(res.Prices)
			base := row(bench.SystemBaseline, w.Name).USDPerMillion(res.Prices)
			line := ""
			for _, l := range strings.Split(table.String(), "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), w.Name) && strings.Contains(l, "vs baseline") {
					line = l
				}
			}
			if got, want := strings.Contains(line, "unreachable"), after >= base && base <= f+1e-9; got != want {
				t.Errorf("%s: target line %q says unreachable %v; baseline %.4f, floor %.4f, taskledger %.4f", w.Name, line, got, base, f, after)
			}
		}
		for _, r := range res.Rows {
			if r.NA == "" && r.USDPerMillion(res.Prices) <= 0 {
				t.Errorf("%s / %s costs nothing", r.System, r.Workload)
			}
		}

		// The per-attempt extras of the unforgiving path. The call-start
		// mark (a provider without idempotency keys) writes the item once
		// and no index: one write of the item's size. A heartbeat renews
		// the lease — one write of the item — and extends the visibility
		// once; the task is not in by_state until the reconciler adopts it
		// (none runs here), so moving due_at writes no index entry.
		if len(res.Extras) != 2*len(bench.ExtraWorkloads) {
			t.Fatalf("%d extras, want before and after for %v", len(res.Extras), bench.ExtraWorkloads)
		}
		for _, x := range res.Extras {
			item, itemMax := 1.0, 1.0 // a write of the item
			markMax := itemMax
			switch {
			case x.Workload == "30 KB input" && x.System == bench.SystemBefore:
				item, itemMax, markMax = 31, 33, 33 // the item carries the input
			case x.System == bench.SystemAfter:
				// A claim-checked input's reference leaves the completed
				// item a few bytes under 1 KB; the mark's attribute can take
				// it over, one more unit on the completion.
				markMax = 2
			}
			if x.Mark.WRU < item || x.Mark.WRU > markMax || x.Mark.SQS != 0 {
				t.Errorf("%s / %s: the call-start mark bills %g write units and %g SQS requests, want %g–%g units (the item once, no index write) and none",
					x.Workload, x.System, x.Mark.WRU, x.Mark.SQS, item, markMax)
			}
			if x.Beats < bench.ExtraBeats || !near(x.Beat.SQS, 1) || x.Beat.WRU < item || x.Beat.WRU > itemMax {
				t.Errorf("%s / %s: %g heartbeats per task, each %g write units and %g SQS requests; want ≥ %d, %g–%g units (the item, no index) and 1",
					x.Workload, x.System, x.Beats, x.Beat.WRU, x.Beat.SQS, bench.ExtraBeats, item, itemMax)
			}
		}
		// A list page: one by_owner query and one BatchGetItem of the
		// page's tasks; an inbox page: every awaiting_approval shard of
		// by_state, then one BatchGetItem. Each item billed on its own,
		// eventually consistent: at least half a unit per task.
		if len(res.Pages) != 2 {
			t.Fatalf("pages %+v, want GET /tasks and GET /approvals", res.Pages)
		}
		list, inbox := res.Pages[0], res.Pages[1]
		if !near(list.Calls["DynamoDB.Query"], 1) || !near(list.Calls["DynamoDB.BatchGetItem"], 1) || len(list.Calls) != 2 || list.RRU < 0.5*bench.PageTasks {
			t.Errorf("GET /tasks page: calls %v, %g RRU; want 1 Query + 1 BatchGetItem, ≥ %g RRU", list.Calls, list.RRU, 0.5*bench.PageTasks)
		}
		if !near(inbox.Calls["DynamoDB.Query"], 16) || !near(inbox.Calls["DynamoDB.BatchGetItem"], 1) || len(inbox.Calls) != 2 || inbox.RRU < list.RRU {
			t.Errorf("GET /approvals page: calls %v, %g RRU; want 16 Query (one per shard) + 1 BatchGetItem, ≥ the list's %g RRU", inbox.Calls, inbox.RRU, list.RRU)
		}
		for _, s := range []string{"taskledger/baseline", "(taskledger ×2)/SFN", "n/a, exceeds item limit", "target ≤ 8", "taskledger/floor", "floor of §1", "with a requester's list", "ConsumedCapacity as " + e.Backend, "Generate → WaitForApproval → Deliver → Done", "call-start mark", "a 30 s call to a provider without idempotency keys", "global secondary index write units per task", "the reconciler's reads of each task's watch item", "GET /tasks (the caller's tasks", "GET /approvals"} {
			if !strings.Contains(table.String(), s) {
				t.Errorf("the table lacks %q:\n%s", s, table.String())
			}
		}
	})
}

// The latency line has its shape; its figures are reported, not judged.
func TestLatencyLine(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		lat := faultinject.Latency{"DynamoDB": time.Millisecond, "SQS": 2 * time.Millisecond}
		res, err := bench.RunLatency(ctx, &soak.Backend{Name: e.Backend, AWS: e.AWS}, 3, lat)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tasks != 3 || res.Floor != 7*time.Millisecond || !(res.P50 <= res.P90 && res.P90 <= res.Max) {
			t.Errorf("latency result %+v", res)
		}
		var out bytes.Buffer
		res.WriteLine(&out)
		if !strings.Contains(out.String(), "critical-path floor") || !strings.Contains(out.String(), "p50 / floor") {
			t.Errorf("latency line:\n%s", out.String())
		}
	})
}
