package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Defaults of the Handler's optional fields. Together with template.yaml
// they form one arithmetic (docs/timing.md; internal/templatetest checks
// it): Concurrency ≥ the event source's BatchSize, so every admitted record
// starts in the first wave; the function Timeout ≥ DefaultCallTimeout +
// DeadlineMargin + AdmissionSlack, so a full batch is admitted; the queue's
// VisibilityTimeout ≥ 6 × Timeout + the batching window.
const (
	DefaultLease          = 30 * time.Second
	DefaultConcurrency    = 10
	DefaultDeadlineMargin = 5 * time.Second
	// DefaultCallTimeout bounds a call to a provider that declares no call
	// timeout (provider.CallTimer); the real adapters' default is the same.
	DefaultCallTimeout = 2 * time.Minute
	// AdmissionSlack is the time the template's function Timeout keeps
	// beyond DeadlineMargin + call timeout for the batching of records,
	// the claim (with SDK retries) and the heartbeat's start.
	AdmissionSlack = 10 * time.Second
	// MaxVisibility is SQS's largest visibility timeout (12 hours).
	MaxVisibility = 12 * time.Hour
)

// SQS is the subset of the SQS client the worker calls (receive and delete
// belong to the event source mapping).
type SQS interface {
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Hooks are optional fault-injection points (doc.go, "Fault injection"),
// called with the record's task id and a context that ends DeadlineMargin
// before the invocation's deadline (a hook that pauses can wait on it).
type Hooks struct {
	// BeforeClaim runs after the body parsed, before the claim.
	BeforeClaim func(ctx context.Context, taskID string) error
	// AfterClaim runs after a successful claim, before the provider call.
	AfterClaim func(ctx context.Context, taskID string) error
	// AfterProvider runs after the provider returned, before anything is saved.
	AfterProvider func(ctx context.Context, taskID string) error
	// AfterSave runs after the worker wrote the attempt's outcome.
	AfterSave func(ctx context.Context, taskID string) error
}

// ErrFenced is the cause (wrapped with the reason) with which the worker
// cancels a provider call when a heartbeat finds the task another's.
var ErrFenced = errors.New("worker: assignment fenced")

// errDied is what a hook's error becomes: the record stops without writes.
var errDied = errors.New("worker: hook stopped the record")

// Handler processes SQS batches of task messages (functions/worker passes
// it to lambda.Start). Optional fields' zero values take the defaults. It is
// safe for concurrent use; do not change its fields while Handle runs.
type Handler struct {
	// Ledger is the task ledger (required). Its clock is the worker's clock.
	Ledger *ledger.Ledger
	// Provider performs the task (required).
	Provider provider.Provider
	// RetrySafeGeneration declares generation retry-safe (doc.go, "Uncertain
	// outcomes and effect classes"; GENERATION_EFFECT_CLASS).
	RetrySafeGeneration bool
	// Destinations perform deliver tasks (deliver.go); nil: a deliver task
	// is parked as misconfigured.
	Destinations *deliver.Registry
	// Notify is who is notified of a task's completion, failure, park or wait
	// for approval (package followup; nil: nobody), in the write that causes it.
	Notify *followup.Config
	// SQS and QueueURL are used for heartbeats and retry delays (optional:
	// without them, visibility is left to the queue's default).
	SQS      SQS
	QueueURL string
	// Policy decides retry delays (backoff, Retry-After floor).
	Policy retrypolicy.Policy
	// SaveBackoff is the first wait between repeats of a settling write or a
	// result's put (default 100 ms); tests shorten it.
	SaveBackoff time.Duration
	// Lease is how long a claim holds without a heartbeat (DefaultLease),
	// which runs every Lease/3 and extends the message's visibility to 2×Lease.
	Lease time.Duration
	// Concurrency bounds the records processed in parallel (DefaultConcurrency).
	// Keep it at least the batch size: a record waiting for a slot may find too
	// little time left to be admitted.
	Concurrency int
	// CallTimeout bounds one provider call (default: provider.CallTimeout,
	// else DefaultCallTimeout). A record is admitted only when the invocation
	// has at least CallTimeout + DeadlineMargin left.
	CallTimeout time.Duration
	// DeadlineMargin is how long before the Lambda deadline the worker stops
	// starting and running provider calls (DefaultDeadlineMargin).
	DeadlineMargin time.Duration
	// Log is the logger (default: discard).
	Log *slog.Logger
	// Metrics receives EMF records (optional).
	Metrics *metrics.Writer
	// Owner names the lease holder of a record (default "<request id>/<message id>").
	Owner func(ctx context.Context, messageID string) string
	// Hooks are optional fault-injection points.
	Hooks *Hooks
	// Admission gates provider calls on shared per-model limits (nil: none).
	Admission *Admission
	// Spend is the spend accounting of budgeted tasks (optional; spend.go).
	Spend *Spend
	// Payloads is the S3 claim-check store (doc.go, "Payloads in S3"); nil
	// keeps every result inline and makes no S3 call.
	Payloads *payload.Store
	// DocumentMemory bounds the document bytes the records of this
	// instance hold at once (DefaultDocumentMemory; docmemory.go).
	DocumentMemory int64
	// Streams, when set, streams generate calls to a provider.Streamer to the
	// task's WebSocket subscribers, with a done frame only after the result
	// was saved (stream.go). nil: no streaming.
	Streams Streams

	docUsed int64 // document bytes held now (atomic; docmemory.go)
}

// Outcomes of one record, as counted in the batch metrics.
const (
	OutcomeCompleted      = "completed"
	OutcomeRetried        = "retried"
	OutcomeFailed         = "failed"
	OutcomeParked         = "parked"
	OutcomeUnknown        = "unknown"
	OutcomeAckedDuplicate = "acked_duplicate" // someone else owns the task (or it is done): no provider call
	OutcomePoison         = "poison"
	OutcomeFenced         = "fenced"   // lost the assignment during the attempt: its result not saved (a cancel may end by what the worker knew)
	OutcomeDeferred       = "deferred" // back to the queue without an outcome (not due, contended, deadline, AWS error, hook)
	// OutcomeNotAdmitted: no call now (too little time, admission or quota
	// full, documents over memory); back to the queue, no attempt consumed.
	OutcomeNotAdmitted = "not_admitted"
)

// outcomes lists the outcomes in the order the batch log and metrics give them.
var outcomes = []string{OutcomeCompleted, OutcomeRetried, OutcomeFailed, OutcomeParked, OutcomeUnknown,
	OutcomeAckedDuplicate, OutcomePoison, OutcomeFenced, OutcomeDeferred, OutcomeNotAdmitted}

// result is what became of one record.
type result struct {
	outcome string
	retry   bool // report a batch item failure
}

// orDefault is v when set (positive), else def.
func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func (h *Handler) lease() time.Duration  { return orDefault(h.Lease, DefaultLease) }
func (h *Handler) concurrency() int      { return orDefault(h.Concurrency, DefaultConcurrency) }
func (h *Handler) margin() time.Duration { return orDefault(h.DeadlineMargin, DefaultDeadlineMargin) }

// callTimeout is the bound of one provider call (see Handler.CallTimeout).
func (h *Handler) callTimeout() time.Duration {
	return orDefault(h.CallTimeout, orDefault(provider.CallTimeout(h.Provider), DefaultCallTimeout))
}

// admitted reports whether a provider call started now could run its whole
// call timeout before work ends.
func (h *Handler) admitted(work context.Context) bool {
	if work.Err() != nil {
		return false
	}
	dl, ok := work.Deadline()
	return !ok || time.Until(dl) >= h.callTimeout()
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return logging.Discard()
}

func (h *Handler) owner(ctx context.Context, messageID string) string {
	if h.Owner != nil {
		return h.Owner(ctx, messageID)
	}
	req := "local"
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		req = lc.AwsRequestID
	}
	return req + "/" + messageID
}

// Handle processes one SQS batch and returns the message ids to retry
// (ReportBatchItemFailures). Its error is non-nil only when the Handler is
// misconfigured, never for a problem with a record.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if h.Ledger == nil || h.Provider == nil {
		return events.SQSEventResponse{}, errors.New("worker: Handler needs a Ledger and a Provider")
	}
	// work ends DeadlineMargin before the Lambda deadline: no claim or call
	// runs past it; settling writes use ctx, so they still have the margin.
	work := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(ctx, dl.Add(-h.margin()))
		defer cancel()
		if left := time.Until(dl); len(ev.Records) > 0 && left < h.callTimeout()+h.margin() {
			// Expected near the end of a long test invocation; in Lambda, where each
			// batch starts a fresh invocation, it means nothing is ever admitted.
			h.log().WarnContext(ctx, "the invocation starts with less time than one provider call needs; no record is admitted "+
				"(keep the function Timeout at least the call timeout + deadline margin + slack, README \"Timing\")",
				"time_left_ms", left.Milliseconds(), "call_timeout_ms", h.callTimeout().Milliseconds(), "deadline_margin_ms", h.margin().Milliseconds())
		}
	}

	results := make([]result, len(ev.Records))
	sem := make(chan struct{}, h.concurrency())
	var wg sync.WaitGroup
	for i := range ev.Records {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = h.safeRecord(ctx, work, ev.Records[i])
		}()
	}
	wg.Wait()

	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	counts := map[string]int{}
	failed := map[string]bool{}
	for i, r := range results {
		counts[r.outcome]++
		id := ev.Records[i].MessageId
		if r.retry && !failed[id] {
			failed[id] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
	}
	m := h.Metrics.Record("Service", "worker").Add("Records", float64(len(ev.Records)), metrics.Count)
	attrs := []any{"records", len(ev.Records), "item_failures", len(resp.BatchItemFailures)}
	for _, o := range outcomes {
		m.Add(metricName(o), float64(counts[o]), metrics.Count)
		attrs = append(attrs, o, counts[o])
	}
	_ = m.Add("ItemFailures", float64(len(resp.BatchItemFailures)), metrics.Count).Flush()
	h.log().InfoContext(ctx, "batch done", attrs...)
	return resp, nil
}

// safeRecord turns a panic in one record into an item failure for it alone.
func (h *Handler) safeRecord(ctx, work context.Context, rec events.SQSMessage) (r result) {
	defer func() {
		if p := recover(); p != nil {
			h.log().ErrorContext(ctx, "record panicked", "message_id", rec.MessageId, "panic", fmt.Sprint(p))
			r = result{outcome: OutcomeDeferred, retry: true}
		}
	}()
	return h.record(ctx, work, rec)
}

// metricName turns "acked_duplicate" into "AckedDuplicate".
func metricName(o string) string {
	words := strings.Split(o, "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, "")
}
