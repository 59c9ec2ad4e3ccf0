package admission

import (
	"fmt"
	"time"
)

// NotAdmittedError says the last 60 s leave no room for the call: make it
// at or after RetryAt, the earliest slot at which it fits (possibly in the
// next window). Waiting consumes no attempt.
type NotAdmittedError struct {
	Model   string
	RetryAt time.Time
}

func (e *NotAdmittedError) Error() string {
	return fmt.Sprintf("admission: model %q window full; retry at %s", e.Model, e.RetryAt.UTC().Format(time.RFC3339))
}

// UnknownModelError says no limits are configured for the model.
type UnknownModelError struct{ Model string }

func (e *UnknownModelError) Error() string {
	return fmt.Sprintf("admission: no limits configured for model %q", e.Model)
}

// EstimateTooLargeError says a call's token estimate exceeds the model's
// per-window token limit: it can never be admitted.
type EstimateTooLargeError struct {
	Model            string
	Estimated, Limit int64
}

func (e *EstimateTooLargeError) Error() string {
	return fmt.Sprintf("admission: model %q: estimate of %d tokens exceeds the per-window limit of %d", e.Model, e.Estimated, e.Limit)
}
