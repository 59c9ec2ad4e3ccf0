package lambdaenv

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/payload"
)

// Payloads builds the S3 claim-check store (DESIGN §12) on the bucket
// PAYLOAD_BUCKET names, with the default inline threshold
// (payload.DefaultInlineLimit). Unset, it returns nil: every payload stays
// inline, as before the claim-check.
func Payloads(cfg aws.Config, getenv func(string) string) (*payload.Store, error) {
	bucket := getenv("PAYLOAD_BUCKET")
	if bucket == "" {
		return nil, nil
	}
	st, err := payload.New(awsclient.S3(cfg), bucket, payload.Options{})
	if err != nil {
		return nil, fmt.Errorf("PAYLOAD_BUCKET: %w", err)
	}
	return st, nil
}
