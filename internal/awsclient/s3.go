package awsclient

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 returns an S3 client. With a custom endpoint (an emulator) it uses
// path-style addressing and does not log the missing response checksums
// emulators omit (internal/payload verifies SHA-256 itself on every read).
func S3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if cfg.BaseEndpoint != nil || o.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL") != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" {
			o.UsePathStyle = true
			o.DisableLogOutputChecksumValidationSkipped = true
		}
	})
}
