// Package awsclient builds every AWS client taskledger uses, in one place.
//
// Configuration comes from aws-sdk-go-v2/config, so the standard environment
// is honoured: AWS_REGION, credentials, AWS_ENDPOINT_URL and the per-service
// AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS overrides (LocalStack, moto,
// the embedded kumo emulator, or a real account).
//
// Retries are bounded and accounted for. The SDK's standard retryer is kept
// (it handles throttling with backoff and a retry-token bucket), but capped at
// MaxAttempts (default 3) per call. Nothing else in taskledger retries an AWS
// call in a loop: a failed call surfaces to the handler, which either answers
// 503 (submit), reports the SQS record as failed (worker) or leaves the work to
// the next reconciler run. The worst-case number of attempts for one logical
// operation is therefore MaxAttempts × the number of SQS deliveries, and the
// Counter middleware records every attempt so benchmarks and metrics can show it.
package awsclient
