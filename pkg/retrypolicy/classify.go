package retrypolicy

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Classification is the verdict on one error.
type Classification struct {
	// Class is what the error means for the task; 0 for a nil error.
	Class Class
	// RetryAfter is a floor for the next delay, 0 if none.
	RetryAfter time.Duration
	// Reason is a short, stable, machine-ish reason, e.g. "http_429",
	// "aws_ThrottlingException", "dial_error", "deadline_after_send".
	Reason string
}

// DefaultClassifier is the one choke point through which callers classify
// errors. It starts as [Classify]; replace it (before any worker starts) to
// change the rules everywhere at once.
var DefaultClassifier = Classify

// Interfaces matched by method, so that no SDK needs importing.
type (
	// smithy.APIError and the AWS service error types have ErrorCode.
	errorCoder interface{ ErrorCode() string }
	// smithy-go's http ResponseError (and others) have HTTPStatusCode.
	httpStatuser interface{ HTTPStatusCode() int }
	// Errors that carry a server-provided delay.
	retryAfterer interface{ RetryAfter() time.Duration }
)

// awsCodes maps AWS error codes to a class. Codes are those of the services
// taskledger calls (DynamoDB, SQS, Bedrock, Secrets Manager, STS) plus the
// SDK's own list of throttling codes.
var awsCodes = map[string]Class{
	// Throttling and capacity: throttleCodes, added by init.
	// Server side trouble.
	"ServiceUnavailable":             Transient,
	"ServiceUnavailableException":    Transient,
	"InternalServerError":            Transient,
	"InternalServerException":        Transient, // Bedrock's spelling
	"InternalFailure":                Transient,
	"ModelNotReadyException":         Transient,
	"ModelTimeoutException":          Transient,
	"TransactionConflictException":   Transient,
	"TransactionInProgressException": Transient,
	"RequestTimeout":                 Transient,
	"RequestTimeoutException":        Transient,
	// The caller's input.
	"ValidationException":    PermanentInput,
	"SerializationException": PermanentInput,
	"ModelErrorException":    PermanentInput,
	// Configuration, credentials, permissions.
	"AccessDeniedException":                   PermanentConfig,
	"UnrecognizedClientException":             PermanentConfig,
	"InvalidSignatureException":               PermanentConfig,
	"ExpiredTokenException":                   PermanentConfig,
	"IncompleteSignature":                     PermanentConfig,
	"MissingAuthenticationToken":              PermanentConfig,
	"ResourceNotFoundException":               PermanentConfig,
	"NonExistentQueue":                        PermanentConfig,
	"AWS.SimpleQueueService.NonExistentQueue": PermanentConfig,
}

// throttleCodes are the AWS error codes of a refusal for rate or capacity
// (Transient): the request was turned away, not performed.
var throttleCodes = []string{
	"ThrottlingException",
	"ProvisionedThroughputExceededException",
	"RequestLimitExceeded",
	"TooManyRequestsException",
	"Throttling",
	"ThrottledException",
	"RequestThrottledException",
	"RequestThrottled",
	"LimitExceededException",
	"BandwidthLimitExceeded",
	"SlowDown",
	"PriorRequestNotComplete",
	"ServiceQuotaExceededException", // Bedrock: "resubmit later"
}

func init() {
	for _, code := range throttleCodes {
		awsCodes[code] = Transient
	}
}

// Throttle reports whether c is a refusal for rate or capacity: HTTP 429
// (reason "http_429") or one of the AWS throttling codes (reason
// "aws_<code>") — the request was turned away, not performed.
func (c Classification) Throttle() bool {
	code, aws := strings.CutPrefix(c.Reason, "aws_")
	return c.Reason == "http_429" || aws && slices.Contains(throttleCodes, code)
}

// Classify reduces err to a [Classification]. First match wins:
//
//  1. nil → the zero Classification.
//  2. An [*Error] anywhere in the chain → its class (reason "steered_<class>").
//  3. A known AWS error code (ErrorCode() string) → its class (reason
//     "aws_<code>"); ConditionalCheckFailedException, and
//     TransactionCanceledException whose reasons include ConditionalCheckFailed,
//     → PermanentInput with reason "conditional_check": the caller must re-read,
//     not retry.
//  4. An HTTP status ([*StatusError] or HTTPStatusCode() int) ≥ 400 → 429,
//     408, 5xx: Transient; 401, 403, 404: PermanentConfig; other 4xx:
//     PermanentInput (reason "http_<code>").
//  5. [ErrRequestNotSent] → Transient ("request_not_sent").
//  6. A dial failure (*net.OpError with Op "dial", *net.DNSError,
//     ECONNREFUSED) → Transient ("dial_error").
//  7. A failure after the request was written (io.EOF,
//     io.ErrUnexpectedEOF, ECONNRESET, EPIPE, a timeout,
//     context.DeadlineExceeded) → UnknownOutcome.
//  8. context.Canceled → Transient ("canceled").
//  9. Anything else → Transient ("unclassified"); see the package doc.
//
// RetryAfter comes from the *Error, else from a *StatusError or a
// RetryAfter() time.Duration method in the chain; it is never negative.
func Classify(err error) Classification {
	if err == nil {
		return Classification{}
	}
	if c, ok := classifySteered(err); ok {
		return c
	}
	if c, ok := classifyAWSCode(err); ok {
		return c
	}
	if c, ok := classifyStatus(err); ok {
		return c
	}
	return classifyNetwork(err)
}

func classifySteered(err error) (Classification, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return Classification{}, false
	}
	ra := e.RetryAfter
	if ra <= 0 {
		ra = retryAfterOf(err)
	}
	return Classification{Class: e.Class, RetryAfter: max(ra, 0), Reason: "steered_" + e.Class.String()}, true
}

func classifyAWSCode(err error) (Classification, bool) {
	var ec errorCoder
	if !errors.As(err, &ec) {
		return Classification{}, false
	}
	code := ec.ErrorCode()
	switch code {
	case "ConditionalCheckFailedException":
		return Classification{Class: PermanentInput, Reason: "conditional_check"}, true
	case "TransactionCanceledException":
		return classifyCanceledTransaction(ec.(error).Error()), true
	}
	class, ok := awsCodes[code]
	if !ok {
		return Classification{}, false
	}
	c := Classification{Class: class, Reason: "aws_" + code}
	if class == Transient {
		c.RetryAfter = retryAfterOf(err)
	}
	return c, true
}

// classifyCanceledTransaction reads DynamoDB's cancellation reasons, which
// the service lists in the message, e.g. "... [None, ConditionalCheckFailed]".
// A failed condition means the item changed: re-read, don't retry. Conflicts
// and throttling are retried; validation problems are the input's fault.
func classifyCanceledTransaction(msg string) Classification {
	const code = "aws_TransactionCanceledException"
	switch {
	case strings.Contains(msg, "ConditionalCheckFailed"):
		return Classification{Class: PermanentInput, Reason: "conditional_check"}
	case strings.Contains(msg, "ValidationError"),
		strings.Contains(msg, "ItemCollectionSizeLimitExceeded"):
		return Classification{Class: PermanentInput, Reason: code}
	}
	return Classification{Class: Transient, Reason: code}
}

func classifyStatus(err error) (Classification, bool) {
	code, _ := statusOf(err)
	if code < 400 || code > 599 {
		return Classification{}, false
	}
	c := Classification{Reason: "http_" + strconv.Itoa(code)}
	switch {
	case code == 429, code == 408, code >= 500:
		// 5xx includes 529 (overloaded); a provider whose 5xx may hide an
		// accepted request must wrap with Uncertain.
		c.Class = Transient
		c.RetryAfter = retryAfterOf(err)
	case code == 401, code == 403, code == 404:
		// 404 from a provider means a wrong model id or endpoint.
		c.Class = PermanentConfig
	default:
		c.Class = PermanentInput
	}
	return c, true
}

func classifyNetwork(err error) Classification {
	if errors.Is(err, ErrRequestNotSent) {
		return Classification{Class: Transient, Reason: "request_not_sent"}
	}
	if isDialError(err) {
		return Classification{Class: Transient, Reason: "dial_error"}
	}
	if reason := afterSendReason(err); reason != "" {
		return Classification{Class: UnknownOutcome, Reason: reason}
	}
	if errors.Is(err, context.Canceled) {
		return Classification{Class: Transient, Reason: "canceled"}
	}
	return Classification{Class: Transient, Reason: "unclassified"}
}

// isDialError reports failures that happen before any byte of the request is
// sent: the connection was never made.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}

// afterSendReason names failures that can happen after the request was
// written, when the provider may already have acted; "" if err is none.
func afterSendReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_after_send"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection_lost"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection_reset"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout_after_send"
	}
	return ""
}

// retryAfterOf finds a server-provided delay in the chain; 0 if none.
func retryAfterOf(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		return se.RetryAfter
	}
	var ra retryAfterer
	if errors.As(err, &ra) {
		return max(ra.RetryAfter(), 0)
	}
	return 0
}
