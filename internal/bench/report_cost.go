package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskledger/taskledger/internal/tasklist"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// WriteTable prints the cost tables: billing units and USD per million
// tasks per workload and system, calls per task by operation, the ratios,
// and the cost targets.
func (c *CostResult) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cost per task on %s, %d tasks per workload and system, one at a time (DynamoDB units from item sizes by DynamoDB's rules, global secondary index writes included; prices us-east-1 on-demand, read %s, see docs/cost.md)\n",
		c.Backend, c.Tasks, PricesRead)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tsystem\tWRU\tRRU\temulator CU\tSQS req\tS3 PUT\tS3 GET\tλ req\tλ GB-s\tSFN trans\tUSD / M tasks\t")
	for _, r := range c.Rows {
		if r.NA != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\t\t\t\t\t\n", r.Workload, r.System, r.NA)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.6f\t%.0f\t%.2f\t\n", r.Workload, r.System,
			r.WRU, r.RRU, r.reported(), r.SQS, r.S3Put, r.S3Get, r.Invocations, r.GBSeconds, r.Transitions, r.USDPerMillion(c.Prices))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "   emulator CU: ConsumedCapacity as %s\n", c.crossCheck())
	if tl := c.taskledger(Workloads[0].Name); tl.NA == "" {
		fmt.Fprintf(w, "   RRU: taskledger's include the reconciler's reads of each task's watch item at its dispatch deadline, measured by running it over the row's completed tasks (%s: %.3f per task — the task's consistent read in a BatchGetItem, and its watch item's share of the consistent Query, its size over 4 KB); per-run reads (the cursors, an empty shard's Query, the by_state walk) are not per task and left out, as before.\n",
			tl.Workload, tl.WatchRRU)
	}
	fmt.Fprintln(w, "   λ GB-s: billed at the template's memory for the modelled AWS call time (DynamoDB 5 ms, SQS 10 ms, S3 15 ms per call); provider and destination time excluded (the same in every system). SQS: the event source's empty long polls excluded (a per-poller, not per-task, cost). Step Functions: one execution of generate→approve→deliver, derived (see below).")

	fmt.Fprintln(w, "   1 MB document: taskledger before the claim-check cannot take it (400 KB item, 32 KB input cap); after, POST /uploads (intent PUT), the client's PUT to the presigned URL, the submit's Resolve (intent GET, HEAD, and a GET to hash it where the store kept no SHA-256 checksum — kumo and moto keep none, S3 does) and Adopt (CopyObject to inputs/, GET to verify), the worker's GET. The baseline cannot put it in an SQS message (1 MiB limit, 256 KB before 2025: the 1 MiB document and its envelope exceed it): the producer PUTs it to S3 and the message names the key (SQS extended client), the consumer GETs it. Step Functions (256 KB state payload limit): the caller PUTs it to S3, Generate GETs it. Neither baseline declares, checks or copies the upload.")

	c.writeIndexes(w)

	fmt.Fprintln(w, "\nAWS calls per task by operation (SDK middleware counts; Step Functions derived)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tsystem\tcalls\t")
	for _, r := range c.Rows {
		if r.NA != "" {
			continue
		}
		var parts []string
		for _, op := range sortedOps([]CostRow{r}) {
			parts = append(parts, fmt.Sprintf("%s %s", op, trim(r.Calls[op])))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r.Workload, r.System, strings.Join(parts, ", "))
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nStep Functions Standard: %s walked: %d states entered (%s) = %d transitions; %d Lambda invocations, %d task-token message(s)\n",
		"stepfunctions.asl.json", len(c.SFN.States), strings.Join(c.SFN.States, " → "), c.SFN.Transitions, c.SFN.LambdaInvokes, c.SFN.SQSTokenSends)

	fmt.Fprintln(w, "\nUSD per million tasks, side by side")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\ttaskledger\tbaseline\ttaskledger/baseline\tfloor of §1\ttaskledger/floor\tbaseline/floor\tSFN workflow\ttaskledger ×2 (generate+deliver)\t(taskledger ×2)/SFN\t")
	for _, wl := range Workloads {
		tl := c.taskledger(wl.Name)
		base, _ := c.Row(SystemBaseline, wl.Name)
		sfn, _ := c.Row(SystemSFN, wl.Name)
		fl, _ := c.Row(SystemFloor, wl.Name)
		p := c.Prices
		b, f := base.USDPerMillion(p), fl.USDPerMillion(p)
		if tl.NA != "" {
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t-\t%.2f\t-\t%.2f\t%.2f\t-\t-\t\n", wl.Name, "n/a", b, f, div(b, f), sfn.USDPerMillion(p))
			continue
		}
		t := tl.USDPerMillion(p)
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", wl.Name, t, b, div(t, b), f, div(t, f), div(b, f),
			sfn.USDPerMillion(p), 2*t, div(2*t, sfn.USDPerMillion(p)))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "   the SFN workflow includes an approval step between generate and deliver; taskledger's equivalent is priced as two tasks of the same size with the approval itself not priced.")
	fmt.Fprintln(w, "   floor of §1: derived, not run — what any submit → SQS → worker design must bill to keep DESIGN §1, each forced call at its cheapest: the submit's conditional write (deduplicated and durable before the 202), SendMessage + receive + delete, the fenced claim and the conditional completion (1 write unit each, the record holding nothing else), one invocation each of submit and worker; a payload kept in the record while that still fits its write unit, else where it bills least (the record billing its size on every write, an S3 PUT, or a write-once item, the Lambda time of its call counted), read from the message while it fits in the first 64 KB chunk; a document's presigned PUT, one HEAD at submit, the worker's GET and the POST /uploads invocation. baseline/floor < 1: the baseline omits something §1 needs (a record before its message: no deduplicated submit and nothing to recover a lost message from; the input kept beyond the message; any check of an upload — its INPROGRESS put is a claim like the floor's, and fencing a completion is a condition that bills nothing), so no design that keeps the promise can cost less than it at these on-demand prices, one task per batch.")

	fmt.Fprintln(w, "\ncost targets (taskledger as measured in this run)")
	for _, wl := range Workloads {
		tl := c.taskledger(wl.Name)
		label := "before"
		if _, ok := c.Row(SystemAfter, wl.Name); ok {
			label = "after"
		}
		if tl.NA != "" {
			fmt.Fprintf(w, "   %-14s %s: %s\n", wl.Name, label, tl.NA)
			continue
		}
		base, _ := c.Row(SystemBaseline, wl.Name)
		sfn, _ := c.Row(SystemSFN, wl.Name)
		fl, _ := c.Row(SystemFloor, wl.Name)
		t, b, f := tl.USDPerMillion(c.Prices), base.USDPerMillion(c.Prices), fl.USDPerMillion(c.Prices)
		s3 := tl.S3Put + tl.S3Get
		vsBase := below(t, b)
		if t >= b && !reachable(b, f) {
			vsBase += fmt.Sprintf(", unreachable: the baseline is %.2f× the floor of §1", div(b, f))
		}
		scope := ""
		if owner := tl.IndexWRU[tasklist.ByOwnerIndex]; tl.WRU > 8 && tl.WRU-owner <= 8 {
			scope = fmt.Sprintf(", by the by_owner index's %.2f (GET /tasks): %.2f without it", owner, tl.WRU-owner)
		}
		if wl.Document {
			scope += ", a document: the target covers inputs up to the 32 KB cap"
		}
		fmt.Fprintf(w, "   %-14s %s: write units %.2f/task (target ≤ 8: %s%s); S3 requests %.2f/task; USD/M %.2f vs baseline %.2f (%s) and ½ SFN workflow %.2f (%s); %.2f× the floor of §1, %.2f× with a requester's list\n",
			wl.Name, label, tl.WRU, verdict(tl.WRU <= 8), scope, s3, t, b, vsBase,
			sfn.USDPerMillion(c.Prices)/2, below(t, sfn.USDPerMillion(c.Prices)/2), div(t, f), div(t, f+ListingWriteUnits*c.Prices.WriteRequestUnit*1e6))
	}
	c.writeExtras(w)
	c.writePages(w)
}

// ListingWriteUnits is what listing a requester's tasks newest first
// (GET /tasks, DESIGN's HTTP API) adds to the floor of §1: one write unit
// at submit. The submit's conditional write must land at a key its
// idempotency key decides, which says nothing of when the task was made;
// a list in creation order needs the task at a second key, and one item
// holds one key, so any design writes that second entry (an index's or an
// item's) once per task.
const ListingWriteUnits = 1

// writeIndexes prints the write units per task billed in each global
// secondary index (part of WRU above).
func (c *CostResult) writeIndexes(w io.Writer) {
	fmt.Fprintln(w, "\nglobal secondary index write units per task (included in WRU above)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "workload\tsystem\t%s\t%s\t\n", ledger.ByStateIndex, tasklist.ByOwnerIndex)
	for _, r := range c.Rows {
		if r.NA != "" || (r.System != SystemBefore && r.System != SystemAfter) {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t\n", r.Workload, r.System, r.IndexWRU[ledger.ByStateIndex], r.IndexWRU[tasklist.ByOwnerIndex])
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "   by_state: none on this path — the submit puts the task without state_shard, after its watch item (1 write unit in the watch table, a table without indexes: in WRU, not here), and a task that ends before its dispatch deadline never enters the index; one still queued or running then is adopted by the reconciler (the adopt write and its index put, and the index delete at its end: 3 units more, not measured here). by_owner (GET /tasks): the put is its one write — it holds scope, created_ms and kind, which nothing later changes.")
}

// writePages prints what one page of each caller-facing list costs.
func (c *CostResult) writePages(w io.Writer) {
	if len(c.Pages) == 0 {
		return
	}
	p := c.Prices
	fmt.Fprintf(w, "\nlist pages (one request, a page of %d tasks; reads eventually consistent, priced from item sizes; one submit invocation)\n", PageTasks)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "page\tRRU\tcalls\tUSD / M pages\t")
	for _, pg := range c.Pages {
		var parts []string
		for _, op := range sortedOps([]CostRow{{Calls: pg.Calls}}) {
			parts = append(parts, fmt.Sprintf("%s %s", op, trim(pg.Calls[op])))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%.2f\t\n", pg.Name, pg.RRU, strings.Join(parts, ", "), pg.USDPerMillion(p))
	}
	_ = tw.Flush()
}

// writeExtras prints the per-attempt extras and what a realistic call
// costs with them.
func (c *CostResult) writeExtras(w io.Writer) {
	if len(c.Extras) == 0 {
		return
	}
	p := c.Prices
	fmt.Fprintf(w, "\nper-attempt writes beyond the idempotent happy path, per occurrence (measured: the unforgiving simulated provider — no idempotency keys, no readback —, and calls held for %d heartbeats at a %s lease)\n", ExtraBeats, extraLease)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tsystem\textra\tWRU\tSQS req\tUSD / M\t")
	for _, x := range c.Extras {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t\n", x.Workload, x.System, "call-start mark (before each call to a provider without idempotency keys)", x.Mark.WRU, x.Mark.SQS, x.Mark.USDPerMillion(p))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t\n", x.Workload, x.System, fmt.Sprintf("heartbeat (every lease/3 while a call runs; %.1f measured per task)", x.Beats), x.Beat.WRU, x.Beat.SQS, x.Beat.USDPerMillion(p))
	}
	_ = tw.Flush()
	const beats = 2 // a 30 s call with the default 30 s lease: beats at 10 s and 20 s
	for _, x := range c.Extras {
		if x.System != SystemAfter {
			continue
		}
		plain, _ := c.Row(SystemAfter, x.Workload)
		base, _ := c.Row(SystemBaseline, x.Workload)
		t := plain.USDPerMillion(p) + x.Mark.USDPerMillion(p) + beats*x.Beat.USDPerMillion(p)
		fmt.Fprintf(w, "   %s, a 30 s call to a provider without idempotency keys (Bedrock, OpenAI-compatible; default lease: heartbeats at 10 s and 20 s): %.2f WRU, USD/M %.2f (%.2f idempotent and instant + mark + %d heartbeats; a task the reconciler finds still running at its dispatch deadline is adopted into by_state: 3 write units more); baseline %.2f, which neither marks nor renews\n",
			x.Workload, plain.WRU+x.Mark.WRU+beats*x.Beat.WRU, t, plain.USDPerMillion(p), beats, base.USDPerMillion(p))
	}
}

// taskledger returns the workload's taskledger row: after the claim-check
// where there is one, else before.
func (c *CostResult) taskledger(workload string) CostRow {
	if after, ok := c.Row(SystemAfter, workload); ok {
		return after
	}
	tl, _ := c.Row(SystemBefore, workload)
	return tl
}

// crossCheck says how the ConsumedCapacity the emulator returned compares
// with the units computed from item sizes.
func (c *CostResult) crossCheck() string {
	calls, reported, agree := 0, 0, true
	for _, r := range c.Rows {
		if r.Derived || r.NA != "" {
			continue
		}
		calls += r.DynamoCalls
		reported += r.ReportedCalls
		if r.ReportedCalls > 0 && math.Abs(r.Reported-(r.WRU+r.RRU)) > 1e-9 {
			agree = false
		}
	}
	switch {
	case calls == 0:
		return c.Backend + " had no DynamoDB calls to check"
	case reported == 0:
		return c.Backend + " returned none (0 of " + strconv.Itoa(calls) + " calls): the WRU/RRU columns are computed from item sizes only"
	case agree:
		return c.Backend + " returned it on " + strconv.Itoa(reported) + " of " + strconv.Itoa(calls) + " calls, equal to the units computed from item sizes"
	default:
		return c.Backend + " returned it on " + strconv.Itoa(reported) + " of " + strconv.Itoa(calls) + " calls but NOT sized by DynamoDB's rules (it differs from the computed units, e.g. the same for a 100 B and a 30 KB item): the WRU/RRU columns are the computed ones"
	}
}

func (r CostRow) reported() string {
	if r.DynamoCalls == 0 {
		return "-"
	}
	if r.ReportedCalls == 0 {
		return "none"
	}
	return fmt.Sprintf("%.2f (%d/%d calls)", r.Reported, r.ReportedCalls, r.DynamoCalls)
}

func trim(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func below(a, b float64) string {
	if a < b {
		return "below"
	}
	return "NOT below"
}

// WriteLine prints the latency line.
func (l *LatencyResult) WriteLine(w io.Writer) {
	fmt.Fprintf(w, "\nlatency, %d tasks one at a time, injected per call: DynamoDB %s, SQS %s, S3 %s (faultinject.Latency); provider %s per call, subtracted\n",
		l.Tasks, l.Latency["DynamoDB"], l.Latency["SQS"], l.Latency["S3"], l.Provider)
	fmt.Fprintf(w, "   submit → completed − provider: p50 %s  p90 %s  max %s; critical-path floor (PutItem + SendMessage + ReceiveMessage + claim + complete UpdateItem) %s\n",
		l.P50.Round(100*time.Microsecond), l.P90.Round(100*time.Microsecond), l.Max.Round(100*time.Microsecond), l.Floor)
	fmt.Fprintf(w, "=> latency overhead p50 / floor = %.2f× (target ≤ 1.2×: %s); event source batching window off for this line (the template's 1 s window adds up to 1 s by design)\n",
		l.Ratio(), verdict(l.Ratio() <= 1.2))
}
