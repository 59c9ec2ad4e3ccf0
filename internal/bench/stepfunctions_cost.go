package bench

// sfnPayloadLimit is Step Functions' state input/output limit (256 KB):
// a larger input goes through S3.
const sfnPayloadLimit = 256 << 10

// stepFunctionsCost prices one execution of the ASL path for workload w.
// Nothing runs: the transitions come from walking the ASL, and the calls
// it implies are priced as measured elsewhere in the same run —
//   - the Generate Lambda keeps the same Powertools idempotency record as
//     the baseline consumer (Lambda tasks are invoked at least once and the
//     provider honours no idempotency key): base's DynamoDB units;
//   - the Deliver Lambda keeps one too, for a small receipt: a PutItem and
//     an UpdateItem of an item under 1 KB (2 write units);
//   - the approval: one SQS message carrying the task token, received and
//     deleted by the approver's application (3 requests); StartExecution
//     and SendTaskSuccess carry no charge beyond the transitions;
//   - an input over the 256 KB state limit is put in S3 by the caller and
//     read by Generate (1 PUT, 1 GET);
//   - Lambda duration: each function's modelled DynamoDB/S3 call time
//     (provider and destination time excluded, as everywhere).
func stepFunctionsCost(w Workload, base CostRow, path ASLPath, memoryMB int) CostRow {
	r := CostRow{System: SystemSFN, Workload: w.Name, Derived: true, Calls: map[string]float64{}}
	r.Transitions = float64(path.Transitions)
	r.Invocations = float64(path.LambdaInvokes)
	r.WRU = base.WRU + 2
	r.RRU = base.RRU
	r.SQS = 3 * float64(path.SQSTokenSends)
	generateMs := 2 * ms(CallLatency["DynamoDB"])
	if w.InputBytes > sfnPayloadLimit {
		r.S3Put, r.S3Get = 1, 1
		generateMs += ms(CallLatency["S3"])
		r.Calls["S3.PutObject"], r.Calls["S3.GetObject"] = 1, 1
	}
	deliverMs := 2 * ms(CallLatency["DynamoDB"])
	r.GBSeconds = LambdaGBSeconds(generateMs, memoryMB)
	if path.LambdaInvokes > 1 {
		r.GBSeconds += float64(path.LambdaInvokes-1) * LambdaGBSeconds(deliverMs, memoryMB)
	}
	r.Calls["StepFunctions.StartExecution"] = 1
	r.Calls["StepFunctions.SendTaskSuccess"] = float64(path.SQSTokenSends)
	r.Calls["Lambda.Invoke"] = float64(path.LambdaInvokes)
	r.Calls["DynamoDB.PutItem"] = float64(path.LambdaInvokes)
	r.Calls["DynamoDB.UpdateItem"] = float64(path.LambdaInvokes)
	r.Calls["SQS.SendMessage"] = float64(path.SQSTokenSends)
	r.Calls["SQS.ReceiveMessage"] = float64(path.SQSTokenSends)
	r.Calls["SQS.DeleteMessage"] = float64(path.SQSTokenSends)
	r.Note = "derived: ASL walk + the baseline's measured idempotency record"
	return r
}
