package awsclient

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// DefaultMaxAttempts bounds the SDK's own retries of one call.
const DefaultMaxAttempts = 3

// Options adjust Load. The zero value reads everything from the environment.
type Options struct {
	// Endpoint, when set, overrides every service endpoint (a test emulator).
	// When empty, AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> apply.
	Endpoint string
	// Region defaults to AWS_REGION, then us-east-1 when an endpoint is set.
	Region string
	// MaxAttempts per SDK call; 0 means TASKLEDGER_SDK_MAX_ATTEMPTS or DefaultMaxAttempts.
	MaxAttempts int
	// StaticCredentials forces the dummy "test"/"test" credentials emulators accept.
	StaticCredentials bool
	// HTTPClient replaces the SDK's HTTP client (tests, fault injection).
	HTTPClient aws.HTTPClient
	// APIOptions are appended to every client's middleware stack
	// (call counting, fault injection).
	APIOptions []func(*middleware.Stack) error
}

// Load returns an aws.Config with bounded retries.
func Load(ctx context.Context, o Options) (aws.Config, error) {
	maxAttempts := o.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
		if v := os.Getenv("TASKLEDGER_SDK_MAX_ATTEMPTS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 10 {
				return aws.Config{}, fmt.Errorf("awsclient: TASKLEDGER_SDK_MAX_ATTEMPTS=%q: want an integer from 1 to 10", v)
			}
			maxAttempts = n
		}
	}
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.AddWithMaxAttempts(retry.NewStandard(), maxAttempts)
		}),
	}
	region := o.Region
	if region == "" && os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		if o.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL") != "" {
			region = "us-east-1"
		}
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if o.StaticCredentials {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	if o.Endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(o.Endpoint))
	}
	if o.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(o.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsclient: load AWS config: %w", err)
	}
	cfg.APIOptions = append(cfg.APIOptions, o.APIOptions...)
	return cfg, nil
}

// DynamoDB returns a DynamoDB client. Response CRC32 validation is disabled
// when a custom endpoint is used, because emulators (kumo) omit X-Amz-Crc32.
func DynamoDB(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if cfg.BaseEndpoint != nil || o.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL") != "" || os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" {
			o.DisableValidateResponseChecksum = true
		}
	})
}

// SQS returns an SQS client.
func SQS(cfg aws.Config) *sqs.Client {
	return sqs.NewFromConfig(cfg)
}

// DefaultHTTPClient is the SDK's buildable client with more idle
// connections per host, so concurrent handlers reuse connections.
func DefaultHTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = 64
	})
}
