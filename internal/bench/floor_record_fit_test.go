package bench

import "testing"

// TestFloorKeepsAPayloadThatFitsTheRecord: floorCost documents that "an
// input or result that does not fit in the record's one write unit is kept
// outside the queue", and that the record "holds nothing but the payloads,
// so a small task's record fits in one write unit". "Fits" is the record's
// total against one unit, not each payload against half a unit: a 900 B
// prompt with no result fits the record's one write unit (900 <= 1024), so
// the floor bills the three record writes and no second durable copy of it
// (an S3 PUT or a write-once item). A floor above what a design keeping
// DESIGN §1 needs is not the least such a design bills.
func TestFloorKeepsAPayloadThatFitsTheRecord(t *testing.T) {
	t.Parallel()
	for _, w := range []Workload{
		{Name: "900 B input", InputBytes: 900},
		{Name: "100 B input, 800 B result", InputBytes: 100, ResultBytes: 800},
	} {
		f := floorCost(w, 256)
		if w.InputBytes+w.ResultBytes > writeUnitBytes {
			t.Fatalf("%s: the workload does not fit one write unit; fix the test", w.Name)
		}
		if f.WRU != 3 || f.S3Put != 0 {
			t.Errorf("%s: record %d B fits one write unit, but the floor bills %.0f write units and %.0f S3 PUTs (calls %v); want 3 and 0",
				w.Name, w.InputBytes+w.ResultBytes, f.WRU, f.S3Put, f.Calls)
		}
	}
}
