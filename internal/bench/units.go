package bench

// DynamoDB, SQS and Lambda billing units, by the services' published rules.
// Pure functions: bench_test.go checks their arithmetic.

const (
	writeUnitBytes = 1024      // one write request unit per started KB
	readUnitBytes  = 4 * 1024  // one read request unit per started 4 KB
	sqsChunkBytes  = 64 * 1024 // one SQS request per started 64 KB chunk
)

// WriteUnits returns the write request units of one write: an UpdateItem
// (and a PutItem over an existing item, a DeleteItem) bills the larger of
// the item's size before and after, one unit per started KB, at least one.
// A transactional write bills twice that.
func WriteUnits(before, after int, transactional bool) float64 {
	n := max(before, after)
	u := float64(max(1, (n+writeUnitBytes-1)/writeUnitBytes))
	if transactional {
		u *= 2
	}
	return u
}

// ReadUnits returns the read request units of one read of size bytes (a
// GetItem's item, or the sum of the items a Query returns): one per started
// 4 KB, at least one; half for an eventually consistent read, twice for a
// transactional one.
func ReadUnits(size int, consistent, transactional bool) float64 {
	u := float64(max(1, (size+readUnitBytes-1)/readUnitBytes))
	switch {
	case transactional:
		u *= 2
	case !consistent:
		u /= 2
	}
	return u
}

// SQSRequests returns the billed requests of one SQS call carrying payload
// bytes: one per started 64 KB chunk, at least one.
func SQSRequests(payload int) float64 {
	return float64(max(1, (payload+sqsChunkBytes-1)/sqsChunkBytes))
}

// LambdaGBSeconds returns the billed GB-seconds of one invocation of ms
// milliseconds (rounded up to the next whole millisecond, at least 1) at
// memoryMB.
func LambdaGBSeconds(ms float64, memoryMB int) float64 {
	billed := float64(int64(ms))
	if billed < ms {
		billed++
	}
	billed = max(billed, 1)
	return billed / 1000 * float64(memoryMB) / 1024
}

// ms returns d in (fractional) milliseconds.
func ms(d interface{ Nanoseconds() int64 }) float64 { return float64(d.Nanoseconds()) / 1e6 }
