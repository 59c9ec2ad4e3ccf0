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
//     task is durable before the caller hears 202 (1 write unit);
//   - SendMessage, and the event source's ReceiveMessage and delete (3 SQS
//     requests);
//   - the worker's fenced claim, so that a second delivery makes no second
//     provider call, and its conditional completion (1 write unit each);
//   - one invocation each of the submit and the worker.
//
// Forced by the payload:
//   - an input or result that does not fit in the record's one write unit
//     is kept outside the queue (a lost or dead-lettered message, a
//     regenerate after a 30-day approval wait need it): the cheaper of one
//     S3 PUT and a write-once item of its size;
//   - the worker reads such an input from its message when it fits in the
//     first 64 KB chunk (free), else by the cheaper of an S3 GET and an
//     eventually consistent read;
//   - a document: the client's PUT to the presigned URL, one HEAD at submit
//     (the declared bytes arrived), the worker's GET, and the POST /uploads
//     invocation.
//
// Lambda duration: the modelled time of those calls at memoryMB.
//
// Where a payload is kept outside the record, the floor is the cheaper of
// the two stores counting everything the choice bills: the request, the
// worker's read back, and the Lambda time of the calls.
func floorCost(w Workload, memoryMB int) CostRow {
	var best CostRow
	for _, inputInS3 := range []bool{false, true} {
		for _, resultInS3 := range []bool{false, true} {
			r := floorVariant(w, memoryMB, inputInS3, resultInS3)
			if best.Calls == nil || r.USDPerMillion(PricesUSEast1) < best.USDPerMillion(PricesUSEast1) {
				best = r
			}
		}
	}
	return best
}

// floorVariant is floorCost with a kept input and a kept result in S3 (or
// in a write-once item) as given.
func floorVariant(w Workload, memoryMB int, inputInS3, resultInS3 bool) CostRow {
	r := CostRow{System: SystemFloor, Workload: w.Name, Derived: true, Calls: map[string]float64{}}
	r.WRU, r.SQS, r.Invocations = 3, 3, 2
	r.Calls["DynamoDB.PutItem"], r.Calls["DynamoDB.UpdateItem"] = 1, 2
	r.Calls["SQS.SendMessage"], r.Calls["SQS.ReceiveMessage"], r.Calls["SQS.DeleteMessageBatch"] = 1, 1, 1
	submitMs := ms(CallLatency["DynamoDB"]) + ms(CallLatency["SQS"])
	workerMs := 2 * ms(CallLatency["DynamoDB"])
	// keep adds the durable store of a payload of n bytes outside the
	// record: an S3 object when inS3, else a write-once item. It returns
	// inS3.
	keep := func(n int, inS3 bool, ms_ *float64) bool {
		if !inS3 {
			r.WRU += WriteUnits(0, n, false)
			r.Calls["DynamoDB.PutItem"]++
			*ms_ += ms(CallLatency["DynamoDB"])
			return false
		}
		r.S3Put++
		r.Calls["S3.PutObject"]++
		*ms_ += ms(CallLatency["S3"])
		return true
	}
	small := func(n int) bool { return n <= writeUnitBytes/2 }
	switch {
	case w.Document:
		r.Invocations++
		r.S3Put++
		r.Calls["S3.PutObject (presigned, by the client)"]++
		r.S3Get += 2
		r.Calls["S3.HeadObject"]++
		r.Calls["S3.GetObject"]++
		submitMs += ms(CallLatency["S3"])
		workerMs += ms(CallLatency["S3"])
	case !small(w.InputBytes):
		inS3 := keep(w.InputBytes, inputInS3, &submitMs)
		// The worker reads it from its message while that stays in the
		// first 64 KB chunk (1 KB left for the envelope); else from where
		// it was kept.
		switch {
		case w.InputBytes <= sqsChunkBytes-writeUnitBytes:
		case inS3:
			r.S3Get++
			r.Calls["S3.GetObject"]++
			workerMs += ms(CallLatency["S3"])
		default:
			r.RRU += ReadUnits(w.InputBytes, false, false)
			r.Calls["DynamoDB.GetItem"]++
			workerMs += ms(CallLatency["DynamoDB"])
		}
	}
	if w.ResultBytes > 0 && !small(w.ResultBytes) {
		keep(w.ResultBytes, resultInS3, &workerMs)
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
