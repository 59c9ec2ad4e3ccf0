package retrypolicy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// apiError has the shape of smithy.APIError.
type apiError struct{ code, msg string }

func (e *apiError) Error() string        { return e.code + ": " + e.msg }
func (e *apiError) ErrorCode() string    { return e.code }
func (e *apiError) ErrorMessage() string { return e.msg }

// responseError has the shape of smithy-go's http.ResponseError.
type responseError struct {
	status int
	err    error
}

func (e *responseError) Error() string       { return fmt.Sprintf("status %d: %v", e.status, e.err) }
func (e *responseError) HTTPStatusCode() int { return e.status }
func (e *responseError) Unwrap() error       { return e.err }

// retryAfterError carries a server delay through a method.
type retryAfterError struct {
	error
	after time.Duration
}

func (e *retryAfterError) RetryAfter() time.Duration { return e.after }
func (e *retryAfterError) Unwrap() error             { return e.error }

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// awsError nests an API error the way the SDK does:
// OperationError → ResponseError → APIError.
func awsError(status int, code, msg string) error {
	return fmt.Errorf("operation UpdateItem: %w", &responseError{status: status, err: &apiError{code: code, msg: msg}})
}

func TestClassify(t *testing.T) {
	t.Parallel()

	var (
		plain      = errors.New("something odd")
		refused    = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		dialTimout = &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}
		dnsErr     = &net.DNSError{Err: "no such host", Name: "bedrock.invalid", IsNotFound: true}
		reset      = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
		readTO     = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	)
	type want struct {
		class  retrypolicy.Class
		reason string
		after  time.Duration
	}
	tests := []struct {
		name string
		err  error
		want want
	}{
		{"Nil", nil, want{}},

		// Steering errors win over everything else in the chain.
		{"SteerRetryable", retrypolicy.Retryable(plain), want{retrypolicy.Transient, "steered_transient", 0}},
		{"SteerThrottled", fmt.Errorf("call: %w", retrypolicy.Throttled(plain, 3*time.Second)), want{retrypolicy.Transient, "steered_transient", 3 * time.Second}},
		{"SteerRetryableKeepsStatusDelay", retrypolicy.Retryable(&retrypolicy.StatusError{StatusCode: 429, RetryAfter: 4 * time.Second}), want{retrypolicy.Transient, "steered_transient", 4 * time.Second}},
		{"SteerPermanentOverStatus", retrypolicy.Permanent(&retrypolicy.StatusError{StatusCode: 503}), want{retrypolicy.PermanentInput, "steered_permanent_input", 0}},
		{"SteerMisconfigured", retrypolicy.Misconfigured(plain), want{retrypolicy.PermanentConfig, "steered_permanent_config", 0}},
		{"SteerUncertainOverNotSent", retrypolicy.Uncertain(fmt.Errorf("x: %w", retrypolicy.ErrRequestNotSent)), want{retrypolicy.UnknownOutcome, "steered_unknown_outcome", 0}},
		{"SteerOutermostWins", retrypolicy.Uncertain(retrypolicy.Retryable(plain)), want{retrypolicy.UnknownOutcome, "steered_unknown_outcome", 0}},

		// HTTP status, from *StatusError or an HTTPStatusCode method.
		{"HTTP429RetryAfter", &retrypolicy.StatusError{StatusCode: 429, RetryAfter: 20 * time.Second}, want{retrypolicy.Transient, "http_429", 20 * time.Second}},
		{"HTTP429RetryAfterMethod", &retryAfterError{&responseError{status: 429, err: plain}, 9 * time.Second}, want{retrypolicy.Transient, "http_429", 9 * time.Second}},
		{"HTTP429Wrapped", fmt.Errorf("openai: %w", &retrypolicy.StatusError{StatusCode: 429}), want{retrypolicy.Transient, "http_429", 0}},
		{"HTTP408", &retrypolicy.StatusError{StatusCode: 408}, want{retrypolicy.Transient, "http_408", 0}},
		{"HTTP500", &responseError{status: 500, err: plain}, want{retrypolicy.Transient, "http_500", 0}},
		{"HTTP502", &retrypolicy.StatusError{StatusCode: 502}, want{retrypolicy.Transient, "http_502", 0}},
		{"HTTP503", &retrypolicy.StatusError{StatusCode: 503, RetryAfter: time.Minute}, want{retrypolicy.Transient, "http_503", time.Minute}},
		{"HTTP504", &retrypolicy.StatusError{StatusCode: 504}, want{retrypolicy.Transient, "http_504", 0}},
		{"HTTP529", &retrypolicy.StatusError{StatusCode: 529}, want{retrypolicy.Transient, "http_529", 0}},
		{"HTTP401", &retrypolicy.StatusError{StatusCode: 401}, want{retrypolicy.PermanentConfig, "http_401", 0}},
		{"HTTP403", &responseError{status: 403, err: plain}, want{retrypolicy.PermanentConfig, "http_403", 0}},
		{"HTTP404", &retrypolicy.StatusError{StatusCode: 404}, want{retrypolicy.PermanentConfig, "http_404", 0}},
		{"HTTP400", &retrypolicy.StatusError{StatusCode: 400}, want{retrypolicy.PermanentInput, "http_400", 0}},
		{"HTTP413", &retrypolicy.StatusError{StatusCode: 413}, want{retrypolicy.PermanentInput, "http_413", 0}},
		{"HTTP422", &retrypolicy.StatusError{StatusCode: 422}, want{retrypolicy.PermanentInput, "http_422", 0}},
		{"HTTP409OtherClient", &retrypolicy.StatusError{StatusCode: 409}, want{retrypolicy.PermanentInput, "http_409", 0}},
		{"HTTP400IgnoresRetryAfter", &retrypolicy.StatusError{StatusCode: 400, RetryAfter: time.Minute}, want{retrypolicy.PermanentInput, "http_400", 0}},
		{"HTTP200FallsThrough", &responseError{status: 200, err: plain}, want{retrypolicy.Transient, "unclassified", 0}},
		{"HTTP200WithEOF", &responseError{status: 200, err: io.ErrUnexpectedEOF}, want{retrypolicy.UnknownOutcome, "connection_lost", 0}},

		// AWS error codes, nested the way the SDK nests them. AWS sends most
		// of these with status 400: the code must win over the status.
		{"AWSThrottling", awsError(400, "ThrottlingException", "slow down"), want{retrypolicy.Transient, "aws_ThrottlingException", 0}},
		{"AWSProvisionedThroughput", awsError(400, "ProvisionedThroughputExceededException", ""), want{retrypolicy.Transient, "aws_ProvisionedThroughputExceededException", 0}},
		{"AWSRequestLimitExceeded", awsError(400, "RequestLimitExceeded", ""), want{retrypolicy.Transient, "aws_RequestLimitExceeded", 0}},
		{"AWSTooManyRequests", awsError(429, "TooManyRequestsException", ""), want{retrypolicy.Transient, "aws_TooManyRequestsException", 0}},
		{"AWSThrottlingQuery", awsError(400, "Throttling", ""), want{retrypolicy.Transient, "aws_Throttling", 0}},
		{"AWSThrottled", awsError(400, "ThrottledException", ""), want{retrypolicy.Transient, "aws_ThrottledException", 0}},
		{"AWSServiceUnavailable", awsError(503, "ServiceUnavailable", ""), want{retrypolicy.Transient, "aws_ServiceUnavailable", 0}},
		{"AWSServiceUnavailableException", awsError(503, "ServiceUnavailableException", ""), want{retrypolicy.Transient, "aws_ServiceUnavailableException", 0}},
		{"AWSInternalServerError", awsError(500, "InternalServerError", ""), want{retrypolicy.Transient, "aws_InternalServerError", 0}},
		{"AWSInternalFailure", awsError(500, "InternalFailure", ""), want{retrypolicy.Transient, "aws_InternalFailure", 0}},
		{"AWSModelNotReady", awsError(429, "ModelNotReadyException", ""), want{retrypolicy.Transient, "aws_ModelNotReadyException", 0}},
		{"AWSTransactionConflict", awsError(400, "TransactionConflictException", ""), want{retrypolicy.Transient, "aws_TransactionConflictException", 0}},
		{"AWSRequestTimeout", awsError(400, "RequestTimeout", ""), want{retrypolicy.Transient, "aws_RequestTimeout", 0}},
		{"AWSThrottlingWithRetryAfter", &retryAfterError{awsError(400, "ThrottlingException", ""), 2 * time.Second}, want{retrypolicy.Transient, "aws_ThrottlingException", 2 * time.Second}},
		{"AWSConditionalCheck", awsError(400, "ConditionalCheckFailedException", "The conditional request failed"), want{retrypolicy.PermanentInput, "conditional_check", 0}},
		{"AWSTxCanceledConditional", awsError(400, "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]"), want{retrypolicy.PermanentInput, "conditional_check", 0}},
		{"AWSTxCanceledConflict", awsError(400, "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]"), want{retrypolicy.Transient, "aws_TransactionCanceledException", 0}},
		{"AWSTxCanceledValidation", awsError(400, "TransactionCanceledException", "Transaction cancelled [ValidationError]"), want{retrypolicy.PermanentInput, "aws_TransactionCanceledException", 0}},
		{"AWSValidation", awsError(400, "ValidationException", ""), want{retrypolicy.PermanentInput, "aws_ValidationException", 0}},
		{"AWSSerialization", awsError(400, "SerializationException", ""), want{retrypolicy.PermanentInput, "aws_SerializationException", 0}},
		{"AWSModelError", awsError(424, "ModelErrorException", ""), want{retrypolicy.PermanentInput, "aws_ModelErrorException", 0}},
		{"AWSAccessDenied", awsError(403, "AccessDeniedException", ""), want{retrypolicy.PermanentConfig, "aws_AccessDeniedException", 0}},
		{"AWSUnrecognizedClient", awsError(400, "UnrecognizedClientException", ""), want{retrypolicy.PermanentConfig, "aws_UnrecognizedClientException", 0}},
		{"AWSInvalidSignature", awsError(400, "InvalidSignatureException", ""), want{retrypolicy.PermanentConfig, "aws_InvalidSignatureException", 0}},
		{"AWSExpiredToken", awsError(400, "ExpiredTokenException", ""), want{retrypolicy.PermanentConfig, "aws_ExpiredTokenException", 0}},
		{"AWSIncompleteSignature", awsError(400, "IncompleteSignature", ""), want{retrypolicy.PermanentConfig, "aws_IncompleteSignature", 0}},
		{"AWSMissingAuthToken", awsError(403, "MissingAuthenticationToken", ""), want{retrypolicy.PermanentConfig, "aws_MissingAuthenticationToken", 0}},
		{"AWSResourceNotFound", awsError(400, "ResourceNotFoundException", ""), want{retrypolicy.PermanentConfig, "aws_ResourceNotFoundException", 0}},
		{"AWSNonExistentQueue", awsError(400, "NonExistentQueue", ""), want{retrypolicy.PermanentConfig, "aws_NonExistentQueue", 0}},
		{"AWSNonExistentQueueQuery", awsError(400, "AWS.SimpleQueueService.NonExistentQueue", ""), want{retrypolicy.PermanentConfig, "aws_AWS.SimpleQueueService.NonExistentQueue", 0}},
		{"AWSCodeWithoutStatus", &apiError{code: "ThrottlingException"}, want{retrypolicy.Transient, "aws_ThrottlingException", 0}},
		{"AWSUnknownCodeFallsToStatus", awsError(400, "SomethingNewException", ""), want{retrypolicy.PermanentInput, "http_400", 0}},
		{"AWSUnknownCodeNoStatus", &apiError{code: "SomethingNewException"}, want{retrypolicy.Transient, "unclassified", 0}},

		// Network: never sent.
		{"NotSent", retrypolicy.ErrRequestNotSent, want{retrypolicy.Transient, "request_not_sent", 0}},
		{"NotSentWrapsDeadline", fmt.Errorf("limiter: %w", errors.Join(retrypolicy.ErrRequestNotSent, context.DeadlineExceeded)), want{retrypolicy.Transient, "request_not_sent", 0}},
		{"DialRefused", refused, want{retrypolicy.Transient, "dial_error", 0}},
		{"DialTimeout", dialTimout, want{retrypolicy.Transient, "dial_error", 0}},
		{"DNS", dnsErr, want{retrypolicy.Transient, "dial_error", 0}},
		{"DNSInDial", fmt.Errorf("post: %w", &net.OpError{Op: "dial", Err: dnsErr}), want{retrypolicy.Transient, "dial_error", 0}},
		{"BareRefused", fmt.Errorf("connect: %w", syscall.ECONNREFUSED), want{retrypolicy.Transient, "dial_error", 0}},

		// Network: after the request was written.
		{"UnexpectedEOF", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), want{retrypolicy.UnknownOutcome, "connection_lost", 0}},
		{"EOF", io.EOF, want{retrypolicy.UnknownOutcome, "connection_lost", 0}},
		{"Reset", reset, want{retrypolicy.UnknownOutcome, "connection_reset", 0}},
		{"BrokenPipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, want{retrypolicy.UnknownOutcome, "connection_reset", 0}},
		{"ReadTimeout", readTO, want{retrypolicy.UnknownOutcome, "timeout_after_send", 0}},
		{"NetErrorTimeout", fmt.Errorf("x: %w", timeoutError{}), want{retrypolicy.UnknownOutcome, "timeout_after_send", 0}},
		{"Deadline", context.DeadlineExceeded, want{retrypolicy.UnknownOutcome, "deadline_after_send", 0}},
		{"DeadlineWrapped", fmt.Errorf("converse: %w", context.DeadlineExceeded), want{retrypolicy.UnknownOutcome, "deadline_after_send", 0}},

		// Context cancellation and the rest.
		{"Canceled", fmt.Errorf("converse: %w", context.Canceled), want{retrypolicy.Transient, "canceled", 0}},
		{"Unclassified", plain, want{retrypolicy.Transient, "unclassified", 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			got := retrypolicy.Classify(tt.err)
			if got.Class != tt.want.class || got.Reason != tt.want.reason || got.RetryAfter != tt.want.after {
				t.Errorf("Classify(%v) = {%v %q %v}, want {%v %q %v}",
					tt.err, got.Class, got.Reason, got.RetryAfter, tt.want.class, tt.want.reason, tt.want.after)
			}
		})
	}
}

func TestDefaultClassifierIsClassify(t *testing.T) {
	t.Parallel()

	err := &retrypolicy.StatusError{StatusCode: 401}
	if got, want := retrypolicy.DefaultClassifier(err), retrypolicy.Classify(err); got != want {
		t.Errorf("DefaultClassifier = %+v, Classify = %+v", got, want)
	}
}

// TestClassifyRealNetwork classifies errors produced by real sockets on the
// loopback interface, so the rules track what the standard library returns.
func TestClassifyRealNetwork(t *testing.T) {
	t.Parallel()

	t.Run("DialRefused", func(t *testing.T) {
		t.Parallel()

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Skipf("no loopback: %v", err)
		}
		addr := ln.Addr().String()
		ln.Close()

		_, err = http.Get("http://" + addr + "/")
		if got := retrypolicy.Classify(err); got.Class != retrypolicy.Transient || got.Reason != "dial_error" {
			t.Errorf("Classify(%v) = %+v, want transient dial_error", err, got)
		}
	})

	// The server reads the whole request, then hangs up or stalls: the
	// provider may have acted, so the outcome is unknown.
	for _, tc := range []struct {
		name   string
		serve  func(net.Conn)
		client *http.Client
	}{
		{"HangUpAfterRequest", func(c net.Conn) { c.Close() }, &http.Client{}},
		{"StallAfterRequest", func(c net.Conn) { time.Sleep(time.Second); c.Close() }, &http.Client{Timeout: 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Skipf("no loopback: %v", err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					req, err := http.ReadRequest(bufio.NewReader(c))
					if err == nil {
						io.Copy(io.Discard, req.Body)
					}
					tc.serve(c)
				}
			}()

			req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			// A POST is not retried by the transport itself.
			_, err = tc.client.Do(req)
			t.Logf("%v → %+v", err, retrypolicy.Classify(err))
			if got := retrypolicy.Classify(err); got.Class != retrypolicy.UnknownOutcome {
				t.Errorf("Classify(%v) = %+v, want unknown_outcome", err, got)
			}
		})
	}
}
