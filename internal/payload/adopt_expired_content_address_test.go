package payload

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// TestAdoptSurvivesTheLifecycleExpiringTheContentAddress: Adopt HEADs
// inputs/<sha256>, finds it and renews it in place (Renew: CopyObject onto
// itself). The lifecycle rule on inputs/ may remove the object between
// that HEAD and the copy — S3 expires objects asynchronously, so one past
// its date still answers a HEAD until it is removed. The renew then meets
// ErrNotFound; the caller's upload is still there, verified, and the
// content address only needs the copy Adopt would have made had the HEAD
// come a moment later, so Adopt falls back to that conditional copy from
// the upload rather than refusing the submit. The deletion is injected
// around the real client right before the renew's CopyObject reaches the
// emulator.
func TestAdoptSurvivesTheLifecycleExpiringTheContentAddress(t *testing.T) {
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		doc := []byte("%PDF-1.7 a document two tasks share, nine days apart")

		// An earlier task made inputs/<sha(doc)>.
		first, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "first", doc))
		if err != nil {
			t.Fatal(err)
		}
		if code, msg := put(t, first, doc); code != 200 {
			t.Fatalf("first PUT: %d %s", code, msg)
		}
		r1, err := b.store.Resolve(ctx, "caller-a", "first")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Adopt(ctx, r1); err != nil {
			t.Fatal(err)
		}

		// A new upload of the same bytes, resolved.
		second, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "second", doc))
		if err != nil {
			t.Fatal(err)
		}
		if code, msg := put(t, second, doc); code != 200 {
			t.Fatalf("second PUT: %d %s", code, msg)
		}
		r2, err := b.store.Resolve(ctx, "caller-a", "second")
		if err != nil {
			t.Fatal(err)
		}

		// The lifecycle removes inputs/<sha> after Adopt's HEAD saw it and
		// before the renew's copy arrives.
		dstKey := InputKey(Digest(doc))
		var expired atomic.Int32
		lifecycle := middleware.InitializeMiddlewareFunc("lifecycle-expiry", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if c, ok := in.Parameters.(*s3.CopyObjectInput); ok && aws.ToString(c.Key) == dstKey &&
				aws.ToString(c.CopySource) == b.store.Bucket()+"/"+dstKey && expired.CompareAndSwap(0, 1) {
				if _, err := b.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.store.Bucket()), Key: aws.String(dstKey)}); err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
			}
			return next.HandleInitialize(ctx, in)
		})
		hooked := s3.New(b.s3.Options(), func(o *s3.Options) {
			o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
				return st.Initialize.Add(lifecycle, middleware.Before)
			})
		})
		st, err := New(hooked, b.store.Bucket(), Options{})
		if err != nil {
			t.Fatal(err)
		}

		ref, err := st.Adopt(ctx, r2)
		if expired.Load() != 1 {
			t.Fatalf("the renew's CopyObject was never sent (Adopt took another path): %v", err)
		}
		if err != nil {
			t.Fatalf("Adopt failed because the content address expired between its HEAD and its renew, though the upload is intact: %v", err)
		}
		got, err := b.store.Get(ctx, ref)
		if err != nil {
			t.Fatalf("the adopted reference is unreadable: %v", err)
		}
		if string(got) != string(doc) {
			t.Fatalf("the adopted reference holds other bytes")
		}
	})
}
