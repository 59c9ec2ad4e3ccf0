package testenv_test

import (
	"testing"
	"time"

	"github.com/taskledger/taskledger/internal/testenv"
)

// TestClockStartIsAtLeastDayMarginBeforeMidnight: a clock started by
// ClockStart can move on by less than DayMargin without leaving its UTC
// day; it starts at the real time (to the millisecond) unless that is
// closer to midnight, and never behind it (kumo's TTL deletion goes by the
// real time).
func TestClockStartIsAtLeastDayMarginBeforeMidnight(t *testing.T) {
	day := time.Date(2031, 3, 31, 0, 0, 0, 0, time.UTC) // the next day is in another month
	for _, c := range []struct {
		name  string
		now   time.Time
		want  time.Time
		stays bool
	}{
		{name: "midday stays", now: day.Add(12*time.Hour + 1234567891), want: day.Add(12*time.Hour + 1234*time.Millisecond), stays: true},
		{name: "just after midnight stays", now: day.Add(time.Second), want: day.Add(time.Second), stays: true},
		{name: "DayMargin before midnight stays", now: day.Add(24*time.Hour - testenv.DayMargin), want: day.Add(24*time.Hour - testenv.DayMargin), stays: true},
		{name: "two minutes before midnight moves past it", now: day.Add(23*time.Hour + 58*time.Minute), want: day.Add(25*time.Hour + 58*time.Minute)},
		{name: "the last millisecond moves past it", now: day.Add(24*time.Hour - time.Millisecond), want: day.Add(26*time.Hour - time.Millisecond)},
		{name: "a zone other than UTC", now: day.Add(23 * time.Hour).In(time.FixedZone("UTC+5", 5*3600)), want: day.Add(25 * time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := testenv.ClockStart(c.now)
			if !got.Equal(c.want) || got.Location() != time.UTC {
				t.Fatalf("ClockStart(%s) = %s, want %s UTC", c.now, got, c.want)
			}
			if got.Before(c.now.Truncate(time.Millisecond)) {
				t.Fatalf("ClockStart(%s) = %s: behind the real time", c.now, got)
			}
			if end := got.Add(testenv.DayMargin - time.Millisecond); end.Format(time.DateOnly) != got.Format(time.DateOnly) {
				t.Fatalf("ClockStart(%s) = %s: moved on by just under DayMargin it reaches %s, another UTC day", c.now, got, end)
			}
			if c.stays != got.Equal(c.now.UTC().Truncate(time.Millisecond)) {
				t.Fatalf("ClockStart(%s) = %s: moved = %v, want %v", c.now, got, c.stays, !c.stays)
			}
		})
	}
}

// TestNextUTCDayIsTheFollowingMidnight: NextUTCDay is the next 00:00 UTC
// after now, across a month's and a year's end, from any zone.
func TestNextUTCDayIsTheFollowingMidnight(t *testing.T) {
	for now, want := range map[time.Time]time.Time{
		time.Date(2031, 3, 31, 0, 0, 0, 0, time.UTC):                       time.Date(2031, 4, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2031, 12, 31, 23, 59, 59, 999, time.UTC):                 time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2032, 2, 28, 12, 0, 0, 0, time.UTC):                      time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC),
		time.Date(2031, 6, 1, 1, 0, 0, 0, time.FixedZone("UTC+5", 5*3600)): time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC), // 20:00 UTC on May 31
	} {
		if got := testenv.NextUTCDay(now); !got.Equal(want) || got.Location() != time.UTC || !got.After(now) {
			t.Errorf("NextUTCDay(%s) = %s, want %s UTC", now, got, want)
		}
	}
}
