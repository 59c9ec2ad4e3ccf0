package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Excess returns the rows over their budget.
func (r *Result) Excess() []CallRow {
	var out []CallRow
	for _, c := range r.Calls {
		if c.Excess {
			out = append(out, c)
		}
	}
	return out
}

// WriteTable prints the bench tables.
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "bench on %s, %d tasks per pipeline\n\n", r.Backend, r.Tasks)

	fmt.Fprintln(w, "AWS calls per task, happy path of the full pipeline (DESIGN §9; SDK middleware counts)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "component\toperation\tcalls\tattempts\tper task\tbudget\t")
	for _, c := range r.Calls {
		flag := "ok"
		if c.Excess {
			flag = "EXCESS"
		}
		if c.Attempts > c.Calls {
			flag += fmt.Sprintf(" (%d SDK retries)", c.Attempts-c.Calls)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%s\t%s\n", c.Component, c.Op, c.Calls, c.Attempts, c.PerTask, c.Budget, flag)
	}
	_ = tw.Flush()
	if ex := r.Excess(); len(ex) > 0 {
		var parts []string
		for _, c := range ex {
			parts = append(parts, fmt.Sprintf("%s %s %.2f/task (budget %s)", c.Component, c.Op, c.PerTask, c.Budget))
		}
		fmt.Fprintf(w, "=> EXCESS over the §9 budget: %s\n", strings.Join(parts, "; "))
	} else {
		fmt.Fprintln(w, "=> within the §9 budget: submit 2 PutItem (the watch item, the task) + 1 SendMessage, worker 1 claim + 1 complete UpdateItem, receive/delete amortised")
	}

	fmt.Fprintln(w, "\nthroughput, same emulator, same run")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pipeline\ttasks\telapsed\ttasks/s\t")
	fmt.Fprintf(tw, "bare: send → event source → provider call → delete\t%d\t%s\t%.1f\t\n", r.Bare.Tasks, r.Bare.Elapsed.Round(time.Millisecond), r.Bare.PerSecond())
	fmt.Fprintf(tw, "full: submit → ledger → event source → worker → ledger\t%d\t%s\t%.1f\t\n", r.Full.Tasks, r.Full.Elapsed.Round(time.Millisecond), r.Full.PerSecond())
	_ = tw.Flush()
	if r.Bare.PerSecond() > 0 {
		fmt.Fprintf(w, "=> full/bare throughput ratio %.2f (the ledger costs %.2f× the bare pipeline's time)\n",
			r.Full.PerSecond()/r.Bare.PerSecond(), r.Full.Elapsed.Seconds()/r.Bare.Elapsed.Seconds())
	}

	fmt.Fprintf(w, "\nsubmit latency, in process, one caller, %d submits (2 PutItem + SendMessage): p50 %s  p99 %s  max %s\n",
		r.LatencyN, r.SubmitP50.Round(10*time.Microsecond), r.SubmitP99.Round(10*time.Microsecond), r.SubmitMax.Round(10*time.Microsecond))

	if len(r.Builds) > 0 {
		fmt.Fprintln(w, "\nbootstraps: linux/arm64, -tags lambda.norpc -trimpath -ldflags '-s -w'; init = host build, start → first Runtime API poll, median of 5")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "function\tsize\tinit\t")
		for _, b := range r.Builds {
			if b.Err != "" && b.Bytes == 0 {
				fmt.Fprintf(tw, "%s\t-\t-\t%s\n", b.Function, clip(b.Err, 120))
				continue
			}
			init := "-"
			if b.Init > 0 {
				init = b.Init.Round(100 * time.Microsecond).String()
			}
			fmt.Fprintf(tw, "%s\t%.2f MiB\t%s\t%s\n", b.Function, float64(b.Bytes)/(1<<20), init, clip(b.Err, 120))
		}
		_ = tw.Flush()
	}

	writeAdmissionTable(w, r.Admission)

	if len(r.Reconciler) > 0 {
		fmt.Fprintln(w, "\nreconciler, one run: DynamoDB reads with completed history (sparse by_state index; watch items read behind a cursor per shard)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "completed\tlive\tread calls\titems read\tRRU\tQuery\tGetItem\tBatchGetItem\tScan\twatched\tnot yet checked\texamined\telapsed\t")
		for _, row := range r.Reconciler {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", row.Completed, row.Live, row.ReadCalls, row.ItemsRead, row.RRU,
				row.Calls["DynamoDB.Query"], row.Calls["DynamoDB.GetItem"], row.Calls["DynamoDB.BatchGetItem"], row.Calls["DynamoDB.Scan"],
				row.Watched, row.Pending, row.Examined, row.Elapsed.Round(time.Millisecond))
		}
		_ = tw.Flush()
		if n := len(r.Reconciler); n >= 2 {
			a, b := r.Reconciler[0], r.Reconciler[n-1]
			fmt.Fprintf(w, "=> %d→%d completed tasks: read calls ×%.2f, items read ×%.2f, read units ×%.2f (elapsed reflects the emulator, which scans its whole table per Query)\n",
				a.Completed, b.Completed, ratio(b.ReadCalls, a.ReadCalls), ratio(b.ItemsRead, a.ItemsRead), fratio(b.RRU, a.RRU))
		}
		fmt.Fprintln(w, "   items read: a shard with a cursor adds its cursor item to what a run reads (each cursor Query reads it, and the shard's watch Query starts at it: BETWEEN is inclusive), a bound per shard whatever the history; read units and calls do not change. The completed tasks' watch items were read by the run(s) when they came due, each once:")
		for _, row := range r.Reconciler {
			fmt.Fprintf(w, "   %d completed: %d run(s) read %d watch items, %d read calls, %d items, %.1f RRU\n", row.Completed, row.Due.Runs, row.Due.Watched, row.Due.ReadCalls, row.Due.ItemsRead, row.Due.RRU)
		}
	}

	if r.Cost != nil {
		fmt.Fprintln(w)
		r.Cost.WriteTable(w)
	}
	if r.Latency != nil {
		r.Latency.WriteLine(w)
	}
}

func ratio(a, b int) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return float64(a)
	}
	return float64(a) / float64(b)
}

func fratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return a
	}
	return a / b
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
