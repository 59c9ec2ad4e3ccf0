package retrypolicy_test

import (
	"errors"
	"testing"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

type coded string

func (c coded) Error() string     { return string(c) }
func (c coded) ErrorCode() string { return string(c) }

// TestThrottle: HTTP 429 and the AWS throttling codes are throttles (the
// request was turned away); a 5xx, another AWS code and a steered error
// are not.
func TestThrottle(t *testing.T) {
	for err, want := range map[error]bool{
		&retrypolicy.StatusError{StatusCode: 429}:        true,
		coded("ThrottlingException"):                     true,
		coded("ServiceQuotaExceededException"):           true,
		coded("ProvisionedThroughputExceededException"):  true,
		&retrypolicy.StatusError{StatusCode: 503}:        false,
		coded("InternalServerException"):                 false,
		coded("ValidationException"):                     false,
		retrypolicy.Retryable(errors.New("gateway 502")): false,
		errors.New("something else"):                     false,
	} {
		if got := retrypolicy.DefaultClassifier(err).Throttle(); got != want {
			t.Errorf("%v: Throttle() = %t, want %t", err, got, want)
		}
	}
}
