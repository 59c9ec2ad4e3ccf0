package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestCreateBuckets: the template's payload bucket is created on kumo and
// moto, reused on a second call, and emptied and deleted by DeleteBuckets;
// a bucket property neither applied nor skipped is an error.
func TestCreateBuckets(t *testing.T) {
	t.Parallel()
	tmpl := realTemplate(t)
	for _, be := range []struct {
		name  string
		start func(*testing.T) string
	}{
		{"kumo", startKumo},
		{"moto", startMoto},
	} {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			endpoint := be.start(t)
			client := s3.NewFromConfig(aws.Config{
				Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1,
			}, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(endpoint), true })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var r [4]byte
			_, _ = rand.Read(r[:])
			prefix := "St" + hex.EncodeToString(r[:]) // upper case: bucket names are lowered
			var n Names
			var lines []string
			if err := tmpl.CreateBuckets(ctx, client, prefix, &n, func(s string) { lines = append(lines, s) }); err != nil {
				t.Fatalf("CreateBuckets: %v", err)
			}
			want := strings.ToLower(prefix) + "-payloadbucket"
			if n.PayloadBucket != want || !slices.Equal(lines, []string{"created bucket " + want}) {
				t.Fatalf("PayloadBucket %q, progress %q; want %q created", n.PayloadBucket, lines, want)
			}
			if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(want), Key: aws.String("inputs/x"), Body: strings.NewReader("x")}); err != nil {
				t.Fatal(err)
			}
			lines = nil
			if err := tmpl.CreateBuckets(ctx, client, prefix, &n, func(s string) { lines = append(lines, s) }); err != nil || !slices.Equal(lines, []string{"reused bucket " + want}) {
				t.Fatalf("second CreateBuckets: %v, progress %q; want reused", err, lines)
			}
			if err := tmpl.DeleteBuckets(ctx, client, n); err != nil {
				t.Fatalf("DeleteBuckets: %v", err)
			}
			if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(want)}); err == nil {
				t.Fatal("the bucket still exists after DeleteBuckets")
			}
			if err := tmpl.DeleteBuckets(ctx, client, n); err != nil {
				t.Fatalf("DeleteBuckets of a deleted bucket: %v", err)
			}
		})
	}

	t.Run("unknown property", func(t *testing.T) {
		t.Parallel()
		bad := realTemplate(t)
		bad.resources["PayloadBucket"].Properties["WebsiteConfiguration"] = map[string]any{}
		err := bad.CreateBuckets(context.Background(), nil, "x", &Names{}, nil)
		if err == nil || !strings.Contains(err.Error(), "WebsiteConfiguration") {
			t.Fatalf("err = %v, want one naming the unsupported property", err)
		}
	})
}
