package bench

// SystemFloor names the promise's floor in the cost tables.
const SystemFloor = "floor: least any queued design keeping DESIGN §1 bills"

// floorCost prices the least that any design with taskledger's shape —
// a submit function, an SQS queue, a worker function (DESIGN §2) — must
// bill for one happy-path task of workload w while keeping DESIGN §1, each
// forced call at its cheapest billing. Nothing runs: it is a lower bound
// to read the measured rows against, and it is generous to the design (its
// record holds nothing but the payloads, so a small task's record fits in
// one write unit).
//
// Forced for every task:
//   - the submit's conditional write: the request is deduplicated and the
//     task is durable before the caller hears 202 (1 write unit, more for a
//     record holding a payload over it);
//   - SendMessage, and the event source's ReceiveMessage and delete (3 SQS
//     requests);
//   - the worker's fenced claim, so that a second delivery makes no second
//     provider call, and its conditional completion (1 write unit each);
//   - one invocation each of the submit and the worker.
//
// Forced by the payload:
//   - an input or result is kept in the record while the record still fits
//     its write unit (the put, the claim and the completion then bill one
//     unit each); otherwise, or where that bills more, outside the queue
//     (a lost or dead-lettered message, a regenerate after a 30-day
//     approval wait need it): one S3 PUT, or a write-once item of its size
//     — or in the record all the same, each of its writes billing the
//     record's size;
//   - the worker reads a kept input from its message when it fits in the
//     first 64 KB chunk (free), else by the cheaper of an S3 GET and an
//     eventually consistent read;
//   - a document: the client's PUT to the presigned URL, one HEAD at submit
//     (the declared bytes arrived), the worker's GET, and the POST /uploads
//     invocation.
//
// Lambda duration: the modelled time of those calls at memoryMB.
//
// The floor is the cheapest of the placements of the input and the result
// (in the record, in S3, in a write-once item), counting everything each
// bills: the requests, the worker's read back, and the Lambda time of the
// calls.
func floorCost(w Workload, memoryMB int) CostRow {
	var best CostRow
	for _, in := range placements {
		for _, out := range placements {
			r := floorVariant(w, memoryMB, in, out)
			if best.Calls == nil || r.USDPerMillion(PricesUSEast1) < best.USDPerMillion(PricesUSEast1) {
				best = r
			}
		}
	}
	return best
}

// placement is where the floor keeps a payload.
type placement int

const (
	inRecord placement = iota // in the task's record, billed on its writes
	inS3                      // an S3 object: one PUT
	inItem                    // a write-once item of its own
)

var placements = []placement{inRecord, inS3, inItem}

// floorVariant is floorCost with the input and the result kept as given
// (a document is always the client's upload; a payload the workload does
// not have is in the record, with no bytes).
func floorVariant(w Workload, memoryMB int, input, result placement) CostRow {
	r := CostRow{System: SystemFloor, Workload: w.Name, Derived: true, Calls: map[string]float64{}}
	r.SQS, r.Invocations = 3, 2
	r.Calls["DynamoDB.PutItem"], r.Calls["DynamoDB.UpdateItem"] = 1, 2
	r.Calls["SQS.SendMessage"], r.Calls["SQS.ReceiveMessage"], r.Calls["SQS.DeleteMessageBatch"] = 1, 1, 1
	submitMs := ms(CallLatency["DynamoDB"]) + ms(CallLatency["SQS"])
	workerMs := 2 * ms(CallLatency["DynamoDB"])
	// keep adds the durable store of a payload of n bytes kept out of the
	// record: an S3 object, or a write-once item.
	keep := func(n int, p placement, ms_ *float64) {
		switch p {
		case inItem:
			r.WRU += WriteUnits(0, n, false)
			r.Calls["DynamoDB.PutItem"]++
			*ms_ += ms(CallLatency["DynamoDB"])
		case inS3:
			r.S3Put++
			r.Calls["S3.PutObject"]++
			*ms_ += ms(CallLatency["S3"])
		}
	}
	inputBytes := w.InputBytes
	if w.Document || inputBytes == 0 {
		input = inRecord // the upload is the client's; the record names it
		inputBytes = 0
	}
	if w.ResultBytes == 0 {
		result = inRecord
	}
	recIn, recOut := 0, 0 // the record's payload bytes after the put, after the completion
	if input == inRecord {
		recIn = inputBytes
	}
	recOut = recIn
	if result == inRecord {
		recOut += w.ResultBytes
	}
	// The put, the claim (the record as put) and the completion (it grows
	// by an inline result), one unit per started KB of the record, each
	// at least one.
	r.WRU += WriteUnits(0, recIn, false) + WriteUnits(recIn, recIn, false) + WriteUnits(recIn, recOut, false)
	if w.Document {
		r.Invocations++
		r.S3Put++
		r.Calls["S3.PutObject (presigned, by the client)"]++
		r.S3Get += 2
		r.Calls["S3.HeadObject"]++
		r.Calls["S3.GetObject"]++
		submitMs += ms(CallLatency["S3"])
		workerMs += ms(CallLatency["S3"])
	} else if input != inRecord {
		keep(inputBytes, input, &submitMs)
		// The worker reads it from its message while that stays in the
		// first 64 KB chunk (1 KB left for the envelope); else from where
		// it was kept.
		switch {
		case inputBytes <= sqsChunkBytes-writeUnitBytes:
		case input == inS3:
			r.S3Get++
			r.Calls["S3.GetObject"]++
			workerMs += ms(CallLatency["S3"])
		default:
			r.RRU += ReadUnits(inputBytes, false, false)
			r.Calls["DynamoDB.GetItem"]++
			workerMs += ms(CallLatency["DynamoDB"])
		}
	}
	if result != inRecord {
		keep(w.ResultBytes, result, &workerMs)
	}
	r.GBSeconds = LambdaGBSeconds(submitMs, memoryMB) + LambdaGBSeconds(workerMs, memoryMB)
	if w.Document {
		r.GBSeconds += LambdaGBSeconds(0, memoryMB) // POST /uploads: a presign, no AWS call
	}
	r.Note = "derived: the calls DESIGN §1 forces, each at its cheapest billing"
	return r
}

// reachable says whether "below the baseline" can be met at all: only
// when the baseline bills more than the floor (below is strict, so a
// baseline equal to the floor, to float rounding, cannot be beaten by a
// design that keeps the promise).
func reachable(base, floor float64) bool { return base > floor+1e-9 }
