package retrypolicy_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestClassString(t *testing.T) {
	t.Parallel()

	tests := []struct {
		class retrypolicy.Class
		want  string
	}{
		{retrypolicy.Transient, "transient"},
		{retrypolicy.PermanentInput, "permanent_input"},
		{retrypolicy.PermanentConfig, "permanent_config"},
		{retrypolicy.UnknownOutcome, "unknown_outcome"},
		{0, "none"},
		{42, "class_42"},
	}
	for _, tt := range tests {
		if got := tt.class.String(); got != tt.want {
			t.Errorf("Class(%d).String() = %q, want %q", int(tt.class), got, tt.want)
		}
	}
}

func TestConstructors(t *testing.T) {
	t.Parallel()

	inner := errors.New("boom")
	tests := []struct {
		name      string
		wrap      func(error) error
		wantClass retrypolicy.Class
		wantAfter time.Duration
	}{
		{"Retryable", retrypolicy.Retryable, retrypolicy.Transient, 0},
		{"Throttled", func(err error) error { return retrypolicy.Throttled(err, 7*time.Second) }, retrypolicy.Transient, 7 * time.Second},
		{"ThrottledNegative", func(err error) error { return retrypolicy.Throttled(err, -time.Second) }, retrypolicy.Transient, 0},
		{"Permanent", retrypolicy.Permanent, retrypolicy.PermanentInput, 0},
		{"Misconfigured", retrypolicy.Misconfigured, retrypolicy.PermanentConfig, 0},
		{"Uncertain", retrypolicy.Uncertain, retrypolicy.UnknownOutcome, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			if got := tt.wrap(nil); got != nil {
				t.Fatalf("wrap(nil) = %#v, want untyped nil", got)
			}
			err := tt.wrap(inner)
			var e *retrypolicy.Error
			if !errors.As(err, &e) {
				t.Fatalf("wrap(err) = %T, want *Error", err)
			}
			if e.Class != tt.wantClass || e.RetryAfter != tt.wantAfter {
				t.Errorf("got class %v after %v, want %v after %v", e.Class, e.RetryAfter, tt.wantClass, tt.wantAfter)
			}
			if !errors.Is(err, inner) {
				t.Error("Unwrap does not reach the inner error")
			}
			if err.Error() != "boom" {
				t.Errorf("Error() = %q, want the inner text", err.Error())
			}
			if !errors.Is(err, &retrypolicy.Error{Class: tt.wantClass}) || !errors.Is(err, &retrypolicy.Error{}) {
				t.Error("errors.Is does not match an *Error target of the same class")
			}
			other := retrypolicy.Class(1 + int(tt.wantClass)%4)
			if errors.Is(err, &retrypolicy.Error{Class: other}) {
				t.Errorf("errors.Is matched a %v target", other)
			}
		})
	}
}

func TestErrorWithoutInner(t *testing.T) {
	t.Parallel()

	e := &retrypolicy.Error{Class: retrypolicy.PermanentConfig}
	if got, want := e.Error(), "retrypolicy: permanent_config"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if e.Unwrap() != nil {
		t.Error("Unwrap() != nil")
	}
}

func TestStatusErrorError(t *testing.T) {
	t.Parallel()

	if got, want := (&retrypolicy.StatusError{StatusCode: 503}).Error(), "http 503"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&retrypolicy.StatusError{StatusCode: 400, Body: "bad"}).Error(), "http 400: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	// A long body of multi-byte runes is cut short on a rune boundary.
	long := strings.Repeat("é", 1000)
	got := (&retrypolicy.StatusError{StatusCode: 400, Body: long}).Error()
	if len(got) > len("http 400: ")+256+len("…") {
		t.Errorf("Error() is %d bytes, want it truncated", len(got))
	}
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Error() = %q, want valid UTF-8 ending in an ellipsis", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := func(d time.Duration, layout string) string { return now.Add(d).Format(layout) }
	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{"Empty", "", 0},
		{"Seconds", "120", 2 * time.Minute},
		{"SecondsSpaces", "  5 ", 5 * time.Second},
		{"Zero", "0", 0},
		{"CappedSeconds", "7200", time.Hour},
		{"OverflowSeconds", "99999999999999999999999", time.Hour},
		{"Negative", "-5", 0},
		{"Plus", "+5", 0},
		{"Fraction", "1.5", 0},
		{"Garbage", "soon", 0},
		{"IMFFixdate", date(90*time.Second, "Mon, 02 Jan 2006 15:04:05 GMT"), 90 * time.Second},
		{"RFC850", date(30*time.Second, "Monday, 02-Jan-06 15:04:05 GMT"), 30 * time.Second},
		{"Asctime", date(10*time.Second, "Mon Jan _2 15:04:05 2006"), 10 * time.Second},
		{"PastDate", date(-time.Minute, "Mon, 02 Jan 2006 15:04:05 GMT"), 0},
		{"FarFutureDate", date(48*time.Hour, "Mon, 02 Jan 2006 15:04:05 GMT"), time.Hour},
		{"DateWithWrongZone", "Sun, 01 Mar 2026 12:01:00 PST", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			if got := retrypolicy.ParseRetryAfter(tt.in, now); got != tt.want {
				t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
