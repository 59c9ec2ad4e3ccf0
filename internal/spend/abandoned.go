package spend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// AttemptReservationID names the reservation of attempt (its number) of
// t's current run, on its budget items and its caller's daily quota:
// "<task>.<created>.a<n>", and "<task>.<created>.p<parks>.a<n>" once the
// task was parked (t.OwnBudget() prefixes it). A claim counts an attempt
// and a release or a wait gives it back, so an attempt that never called
// reuses its id (a reservation still held is not counted twice), and the
// attempt before this one is always attempt - 1. An operator's retry
// starts the attempts again at 0 after a park, so the park count keeps
// the ids of the runs apart: else the retried run's first attempt would
// find the parked run's reservation under its own id — held for a call
// that may have billed — take it for its own lost write, skip the
// budget's check and call again. The task's own budget name (its id and
// creation) keeps apart a task id reused after its retention, whose
// attempts must not meet their predecessor's reservations on a chain
// record both reserve on.
func AttemptReservationID(t *ledger.Task, attempt int) string {
	if t.ParkCount > 0 {
		return t.OwnBudget() + ".p" + strconv.Itoa(t.ParkCount) + ".a" + strconv.Itoa(attempt)
	}
	return t.OwnBudget() + ".a" + strconv.Itoa(attempt)
}

// SettleAbandoned settles what the attempts of a task's run still hold
// when the run ended without its worker settling them — a crashed
// attempt's reservation, which only the task's next attempt settled
// (nobody else knows its amount), and there is no next attempt when the
// task is parked, resolved or cancelled. Left held, it is counted as a
// call in flight: on a budget until the item expires, and on the
// caller's day until the day ends, where every other task of the caller
// that fits only once it is gone waits for it.
//
// t is the task as its run ended (before a park: its ParkCount and
// Attempts name the run's reservations, AttemptReservationID 1 ..
// t.Attempts; a caller acting on a parked task passes it with the park
// count the run had). Each reservation found is settled in full — the
// provider may have billed it: it is charged what it held, its tokens
// split into output (the call's max_tokens, from t's inline input) and
// input — except attempt notCalled (0: none), whose call provably never
// started, given back at nothing. Items: t's chain's and own budget items
// when it has a budget, and its caller's daily quota items of the UTC day
// of today (the one whose room calls are refused by) and of t's last
// write; a reservation made on another day holds no room today.
//
// The amount a reservation holds is part of its settle's condition and
// of what it charges, and only the attempt's worker computed it (from
// the input, possibly in S3, the documents, the model and the price
// table), so each item is read first: one consistent GetItem per item,
// then one conditional UpdateItem per reservation found there
// (SettleIfReserved's, on the amount read): a worker that settled in
// between, a repeat after a lost reply or a crash, or a second caller
// finds it gone and changes nothing. It returns how many reservations it
// settled; errors (joined) leave theirs held — the safe side — and the
// other items are still settled. Deliveries reserve nothing: pass only
// tasks that call a model.
func (a *Accountant) SettleAbandoned(ctx context.Context, t *ledger.Task, notCalled int) (settled int, err error) {
	if t.Attempts <= 0 {
		return 0, nil
	}
	ids := make(map[string]int, t.Attempts) // rsv_ attribute → attempt
	rs := make(map[int]Reservation, t.Attempts)
	for n := 1; n <= t.Attempts; n++ {
		r := Reservation{ID: AttemptReservationID(t, n)}
		if !idPattern.MatchString(r.ID) {
			return 0, fmt.Errorf("spend: invalid reservation id %q", r.ID)
		}
		ids[r.attr()] = n
		rs[n] = r
	}
	type item struct {
		key  string
		acct *Accountant
	}
	var items []item
	if t.HasBudget() {
		for _, k := range []string{ChainKeyOf(t), TaskKeyOf(t)} {
			if err := checkKey(k); err != nil {
				return 0, err
			}
			items = append(items, item{BudgetItemKey(k), a})
		}
	}
	// A quota item's expiry is the quota's (Quotas), not a budget's.
	qa := &Accountant{c: a.c}
	qa.c.Retention = quotaRetention
	today := a.c.Now().UTC().Format(time.DateOnly)
	days := []string{today}
	if t.UpdatedMs > 0 {
		if d := time.UnixMilli(t.UpdatedMs).UTC().Format(time.DateOnly); d != today {
			days = append(days, d)
		}
	}
	for _, day := range days {
		items = append(items, item{QuotaItemKey(t.Scope, day), qa})
	}
	out := maxOutputTokens(t)
	var errs []error
	for _, it := range items {
		found, gerr := it.acct.get(ctx, it.key)
		if gerr != nil {
			errs = append(errs, gerr)
			continue
		}
		for attr, v := range found {
			n, ok := ids[attr]
			if !ok {
				continue
			}
			r, ok := parseReservation(rs[n].ID, strOf(v))
			if !ok {
				errs = append(errs, fmt.Errorf("spend: settle %s on %s: unreadable reservation %q", rs[n].ID, it.key, strOf(v)))
				continue
			}
			charge := Usage{}
			if n != notCalled {
				o := min(out, r.Tokens)
				charge = Usage{InputTokens: r.Tokens - o, OutputTokens: o, Cost: r.Cost}
			}
			ok, serr := it.acct.settleIfReserved(ctx, it.key, r, charge)
			if serr != nil {
				errs = append(errs, serr)
				continue
			}
			if ok {
				settled++
			}
		}
	}
	return settled, errors.Join(errs...)
}

// quotaRetention is how long a quota item outlives its last write: at
// least quotaTTL after the end of the day it counts.
const quotaRetention = 24*time.Hour + quotaTTL

// parseReservation is the reservation id held at value ("tokens:micros",
// Reservation.value).
func parseReservation(id, value string) (Reservation, bool) {
	ts, cs, ok := strings.Cut(value, ":")
	if !ok {
		return Reservation{}, false
	}
	tokens, err1 := strconv.ParseInt(ts, 10, 64)
	cost, err2 := strconv.ParseInt(cs, 10, 64)
	if err1 != nil || err2 != nil || tokens < 0 || cost < 0 {
		return Reservation{}, false
	}
	return Reservation{ID: id, Tokens: tokens, Cost: Micros(cost)}, true
}

// maxOutputTokens is the output part of t's call's reservation
// (contract.CallMaximumWith: the input's max_tokens, or MaxTokensLimit),
// read from t's inline input; 0 when the input is offloaded (its
// reservation is then charged as input tokens alone: the total, and the
// cost, are the same).
func maxOutputTokens(t *ledger.Task) int64 {
	g, err := contract.ParseGenerateInput([]byte(t.Input))
	if err != nil {
		return 0
	}
	_, out := contract.CallMaximumWith(g, nil)
	return out
}
