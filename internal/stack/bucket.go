package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Bucket properties applied locally, and the ones skipped on purpose:
// encryption, public-access blocks, ownership controls, CORS and lifecycle
// rules are the account's business (an emulator neither enforces nor ages them),
// and the bucket policy (a separate AWS::S3::BucketPolicy) is not created.
var (
	bucketApplied = []string{"BucketName"} // replaced by lower(prefix-LogicalId)
	bucketSkipped = []string{"BucketEncryption", "PublicAccessBlockConfiguration", "OwnershipControls",
		"LifecycleConfiguration", "VersioningConfiguration", "Tags",
		"CorsConfiguration"} // local uploads go through the same-origin proxy (internal/local)
)

// BucketName is the local name of a template bucket: S3 names are lower
// case.
func BucketName(prefix, logicalID string) string {
	return strings.ToLower(prefix + "-" + logicalID)
}

// CreateBuckets makes every AWS::S3::Bucket of the template, named
// BucketName(prefix, LogicalId), and records the payload bucket in n. An
// existing bucket of that name owned by the caller is reused.
func (t *Template) CreateBuckets(ctx context.Context, client *s3.Client, prefix string, n *Names, progress func(string)) error {
	if prefix == "" {
		return errors.New("stack: create buckets: empty prefix")
	}
	if progress == nil {
		progress = func(string) {}
	}
	for _, id := range t.LogicalIDs(typeBucket) {
		props, _ := t.Resource(id)
		if err := checkKeys(props, "bucket "+id, bucketApplied, bucketSkipped); err != nil {
			return fmt.Errorf("stack: create bucket %s: %w", id, err)
		}
		name := BucketName(prefix, id)
		// HEAD first: in us-east-1 S3 (and moto) answer 200 to creating a
		// bucket the caller already owns, so CreateBucket cannot tell.
		created := false
		if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
			created = true
			_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
			if err != nil {
				if !hasCode(err, "BucketAlreadyOwnedByYou") {
					return fmt.Errorf("stack: create bucket %s: %w", name, err)
				}
				created = false
			}
		}
		if id == "PayloadBucket" {
			n.PayloadBucket = name
		}
		progress(verb(created) + " bucket " + name)
	}
	return nil
}

// DeleteBuckets empties and deletes the buckets named in n; a bucket
// already gone is not an error.
func (t *Template) DeleteBuckets(ctx context.Context, client *s3.Client, n Names) error {
	if n.PayloadBucket == "" {
		return nil
	}
	b := aws.String(n.PayloadBucket)
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: b})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if hasCode(err, "NoSuchBucket") {
				return nil
			}
			return fmt.Errorf("stack: list bucket %s: %w", n.PayloadBucket, err)
		}
		for _, o := range page.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: o.Key}); err != nil {
				return fmt.Errorf("stack: empty bucket %s: %w", n.PayloadBucket, err)
			}
		}
	}
	if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b}); err != nil && !hasCode(err, "NoSuchBucket") {
		return fmt.Errorf("stack: delete bucket %s: %w", n.PayloadBucket, err)
	}
	return nil
}
