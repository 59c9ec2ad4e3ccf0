package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ProblemBase prefixes every problem type URI.
const ProblemBase = "https://taskledger.dev/problems/"

// Problem type URIs. They are stable: clients may switch on them.
const (
	TypeIdempotencyKeyMissing = ProblemBase + "idempotency-key-missing" // 400
	TypeIdempotencyKeyInvalid = ProblemBase + "idempotency-key-invalid" // 400
	TypeIdempotencyKeyReused  = ProblemBase + "idempotency-key-reused"  // 422
	TypeCorrelationIDInvalid  = ProblemBase + "correlation-id-invalid"  // 400
	TypeMalformedJSON         = ProblemBase + "malformed-json"          // 400
	TypeInvalidBody           = ProblemBase + "invalid-body"            // 400: the request object
	TypeInvalidInput          = ProblemBase + "invalid-input"           // 400: the task input
	TypeBodyTooLarge          = ProblemBase + "body-too-large"          // 413
	TypeInputTooLarge         = ProblemBase + "input-too-large"         // 413
	TypeUnsupportedMediaType  = ProblemBase + "unsupported-media-type"  // 415
	TypeUnauthenticated       = ProblemBase + "unauthenticated"         // 401
	TypeOriginNotAllowed      = ProblemBase + "origin-not-allowed"      // 403: CORS preflight
	TypeNotFound              = ProblemBase + "not-found"               // 404
	TypeMethodNotAllowed      = ProblemBase + "method-not-allowed"      // 405
	TypeStateConflict         = ProblemBase + "state-conflict"          // 409
	TypeThrottled             = ProblemBase + "throttled"               // 503: DynamoDB throttled
	TypeUnavailable           = ProblemBase + "unavailable"             // 503: the store timed out
	TypeInternal              = ProblemBase + "internal"                // 500
	// Approval decisions (DESIGN §10).
	TypeArtifactChanged        = ProblemBase + "artifact-changed"         // 409
	TypeApprovalRoundChanged   = ProblemBase + "approval-round-changed"   // 409
	TypeDeliveriesStarted      = ProblemBase + "deliveries-started"       // 409
	TypeForbidden              = ProblemBase + "forbidden"                // 403
	TypeArtifactNotDeliverable = ProblemBase + "artifact-not-deliverable" // 422
	// A direct deliver submit the DirectDeliver setting refuses (DESIGN §15).
	TypeDirectDeliverForbidden = ProblemBase + "direct-deliver-forbidden" // 403
)

// Problem is an RFC 9457 problem details object. Field, TaskID and State are
// extension members, present only where they help the caller.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the offending request member ("kind", "input.prompt",
	// "Idempotency-Key", ...).
	Field string `json:"field,omitempty"`
	// TaskID and State describe the task a 409 or 422 is about.
	TaskID string `json:"task_id,omitempty"`
	State  string `json:"state,omitempty"`
	// RetryAfter (seconds) repeats the Retry-After header of a 503.
	RetryAfter int `json:"retry_after,omitempty"`
	// ResultSHA256 is the task's current result hash (artifact-changed).
	ResultSHA256 string `json:"result_sha256,omitempty"`
	// Deliveries names each delivery and its state (deliveries-started).
	Deliveries []DeliveryView `json:"deliveries,omitempty"`

	allow []string // 405: the Allow header
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

func newProblem(typ string, status int, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

func (p *Problem) withField(f string) *Problem { p.Field = f; return p }

func notFound() *Problem {
	return newProblem(TypeNotFound, http.StatusNotFound, "Task not found",
		"No task with this id is visible to the caller.")
}

func throttled(after time.Duration) *Problem {
	secs := int((after + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	p := newProblem(TypeThrottled, http.StatusServiceUnavailable, "Service busy",
		"The task store is throttling requests; nothing was written. Retry after the delay in Retry-After with the same Idempotency-Key.")
	p.RetryAfter = secs
	return p
}

func internalError() *Problem {
	return newProblem(TypeInternal, http.StatusInternalServerError, "Internal error",
		"The request could not be completed. Retrying with the same Idempotency-Key is safe.")
}

// response renders p as application/problem+json.
func (p *Problem) response() events.APIGatewayV2HTTPResponse {
	body, _ := json.Marshal(p)
	r := events.APIGatewayV2HTTPResponse{
		StatusCode: p.Status,
		Headers: map[string]string{
			"Content-Type":           "application/problem+json",
			"Cache-Control":          "no-store",
			"X-Content-Type-Options": "nosniff",
		},
		Body: string(body),
	}
	if p.RetryAfter > 0 {
		r.Headers["Retry-After"] = strconv.Itoa(p.RetryAfter)
	}
	if len(p.allow) > 0 {
		r.Headers["Allow"] = strings.Join(p.allow, ", ")
	}
	return r
}
