package bench

import (
	"testing"
)

// The floor is "each forced call at its cheapest billing": where a payload
// is kept outside the record, it must be the cheaper store counting
// everything the choice bills, the Lambda time of the call included (the
// floor itself charges GB-seconds for it: S3 15 ms, DynamoDB 5 ms per
// call). At 8 KB an S3 PUT ($5 per million) and eight write units ($5 per
// million) tie on request price, and the S3 call's 10 ms more of submit
// time then makes the write-once item the cheaper one.
func TestFloorKeepsAPayloadAtItsCheapest(t *testing.T) {
	t.Parallel()
	const mem = 256
	p := PricesUSEast1
	for _, w := range Workloads {
		if w.Document || w.InputBytes <= writeUnitBytes/2 || w.InputBytes > sqsChunkBytes-writeUnitBytes {
			continue // the input is not kept, or the worker reads it back
		}
		f := floorCost(w, mem)
		if f.S3Put == 0 {
			continue // already the item
		}
		// The same design, the input kept as a write-once item of its
		// size instead of an S3 object: one S3 call fewer in the submit,
		// one DynamoDB call more.
		alt := f
		alt.S3Put--
		alt.WRU += WriteUnits(0, w.InputBytes, false)
		submitMs := ms(CallLatency["DynamoDB"]) + ms(CallLatency["SQS"]) + ms(CallLatency["DynamoDB"])
		workerMs := 2 * ms(CallLatency["DynamoDB"])
		if w.ResultBytes > writeUnitBytes/2 {
			t.Fatalf("%s: this test does not model a kept result", w.Name)
		}
		alt.GBSeconds = LambdaGBSeconds(submitMs, mem) + LambdaGBSeconds(workerMs, mem)
		if got, other := f.USDPerMillion(p), alt.USDPerMillion(p); got > other+1e-9 {
			t.Errorf("%s: the floor keeps the input in S3 at %.4f USD/M, but a write-once item bills %.4f: not the cheapest (keep compares request prices only, not the Lambda time of the call)",
				w.Name, got, other)
		}
	}
}

// "Below the baseline" is strict (below: a < b), so a baseline that bills
// exactly the floor cannot be beaten by a design at the floor: reachable
// must say no (also when they differ only by float rounding), or the
// target line hides an unreachable target.
func TestReachableIsStrict(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base, floor float64
		want        bool
	}{
		{3, 2, true}, {2, 3, false}, {3, 3, false}, {3.0000000001, 3, false},
	} {
		if got := reachable(c.base, c.floor); got != c.want {
			t.Errorf("reachable(baseline %g, floor %g) = %v, want %v (a design at the floor must bill strictly less than the baseline)", c.base, c.floor, got, c.want)
		}
	}
}
