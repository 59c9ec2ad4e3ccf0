package payload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/emulator"
)

func TestMain(m *testing.M) {
	code := m.Run()
	emulator.StopLegs()
	os.Exit(code)
}

type bundle struct {
	leg     string
	s3      *s3.Client
	store   *Store
	counter *awsclient.Counter
}

// eachLeg runs fn as parallel subtests TestX/kumo and TestX/moto, each with
// its own fresh bucket.
func eachLeg(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	for _, leg := range emulator.Legs() {
		t.Run(leg, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, leg))
		})
	}
}

func setup(t *testing.T, leg string) *bundle {
	t.Helper()
	ep := emulator.LegFor(t, leg)
	opts := awsclient.Options{Endpoint: ep, MaxAttempts: 3}
	if leg != "external" {
		opts.StaticCredentials, opts.Region = true, "us-east-1"
	}
	cfg, err := awsclient.Load(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	counter := awsclient.NewCounter()
	cfg.APIOptions = append(cfg.APIOptions, counter.Register)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		// Emulators return no response checksums; Get verifies SHA-256 itself.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	bucket := "payload-test-" + hex.EncodeToString(rnd[:])
	ctx := context.Background()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket on %s: %v", leg, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		for p.HasMorePages() {
			page, err := p.NextPage(cctx)
			if err != nil {
				break
			}
			var ids []s3types.ObjectIdentifier
			for _, o := range page.Contents {
				ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
			}
			for _, id := range ids {
				_, _ = client.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: id.Key})
			}
		}
		_, _ = client.DeleteBucket(cctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})
	st, err := New(client, bucket, Options{})
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	return &bundle{leg: leg, s3: client, store: st, counter: counter}
}
