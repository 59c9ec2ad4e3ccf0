package bench

// Prices are published us-east-1 on-demand prices in USD, free tiers
// excluded (they do not scale with tasks). Every figure was read on
// 2026-12-01 from the page cited next to it; docs/cost.md cites the
// same pages and date. Change them here only, with a new date.
type Prices struct {
	// DynamoDB on-demand, Standard table class, per request unit.
	// https://aws.amazon.com/dynamodb/pricing/on-demand/ — $0.625 per
	// million write request units, $0.125 per million read request units.
	WriteRequestUnit, ReadRequestUnit float64
	// SQS standard queue, per request (every 64 KB chunk of a payload is
	// one request). https://aws.amazon.com/sqs/pricing/ — $0.40 per
	// million requests (first 100 billion a month).
	SQSRequest float64
	// S3 Standard requests. https://aws.amazon.com/s3/pricing/ — PUT,
	// COPY, POST, LIST $0.005 per 1,000; GET, SELECT and all other
	// requests $0.0004 per 1,000.
	S3Put, S3Get float64
	// Lambda, Arm (Graviton2). https://aws.amazon.com/lambda/pricing/ —
	// $0.20 per million requests; $0.0000133334 per GB-second (first 7.5
	// billion GB-seconds a month).
	LambdaRequest, LambdaGBSecond float64
	// Step Functions Standard workflows, per state transition (retries
	// included). https://aws.amazon.com/step-functions/pricing/ — $0.025
	// per 1,000 state transitions.
	StateTransition float64
	// API Gateway (APIGatewayPricesRead),
	// https://aws.amazon.com/api-gateway/pricing/ — WebSocket APIs: $1.00
	// per million messages (first billion a month; a message is billed in
	// 32 KB units) and $0.25 per million connection minutes; HTTP APIs:
	// $1.00 per million requests (first 300 million a month; 512 KB
	// units).
	WebSocketMessage, WebSocketConnectionMinute, HTTPAPIRequest float64
}

// PricesRead is the date the prices were read from the pages above.
const PricesRead = "2026-12-01"

// APIGatewayPricesRead is the date of the API Gateway prices.
const APIGatewayPricesRead = "2026-12-02"

// PricesUSEast1 are the prices above.
var PricesUSEast1 = Prices{
	WriteRequestUnit: 0.625 / 1e6,
	ReadRequestUnit:  0.125 / 1e6,
	SQSRequest:       0.40 / 1e6,
	S3Put:            0.005 / 1e3,
	S3Get:            0.0004 / 1e3,
	LambdaRequest:    0.20 / 1e6,
	LambdaGBSecond:   0.0000133334,
	StateTransition:  0.025 / 1e3,

	WebSocketMessage:          1.00 / 1e6,
	WebSocketConnectionMinute: 0.25 / 1e6,
	HTTPAPIRequest:            1.00 / 1e6,
}
