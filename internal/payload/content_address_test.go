package payload

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestAdoptNeverRewritesAnotherTasksDocument: inputs/<sha256> is shared by
// every task whose input or document has those bytes, so nothing may ever
// write other bytes there. An upload's bytes may change between Resolve
// and Adopt — a second PUT to the same key (kumo and moto accept any
// bytes; the same caller may presign the same id again). Were Adopt to
// copy uploads/<scope>/<id> over inputs/<sha256> unconditionally, that
// would replace caller A's document with caller B's bytes: B's submit
// would fail its own verification, but A's task would read a document that
// no longer matches its reference (document_unavailable) or, for a task
// already referencing it, one gone for good. So Adopt copies only the
// object Resolve verified (CopySourceIfMatch on its ETag) and never over
// an existing content address (If-None-Match "*").
func TestAdoptNeverRewritesAnotherTasksDocument(t *testing.T) {
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		doc := []byte("%PDF-1.7 the contract both callers have")

		// Caller A: declare, upload, resolve, adopt — A's task references
		// inputs/<sha(doc)>.
		ua, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "a-doc", doc))
		if err != nil {
			t.Fatal(err)
		}
		if code, msg := put(t, ua, doc); code != 200 {
			t.Fatalf("A's PUT: %d %s", code, msg)
		}
		ra, err := b.store.Resolve(ctx, "caller-a", "a-doc")
		if err != nil {
			t.Fatal(err)
		}
		aRef, err := b.store.Adopt(ctx, ra)
		if err != nil {
			t.Fatal(err)
		}

		// Caller B declares the same bytes under its own id, uploads them,
		// and Resolve accepts them.
		ub, err := b.store.PresignUpload(ctx, uploadReq("caller-b", "b-doc", doc))
		if err != nil {
			t.Fatal(err)
		}
		if code, msg := put(t, ub, doc); code != 200 {
			t.Fatalf("B's PUT: %d %s", code, msg)
		}
		rb, err := b.store.Resolve(ctx, "caller-b", "b-doc")
		if err != nil {
			t.Fatal(err)
		}
		// Between B's Resolve and Adopt, other bytes of the same length
		// land at B's upload key (a second PUT to the same key).
		evil := bytes.Repeat([]byte("X"), len(doc))
		if _, err := b.s3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(b.store.Bucket()), Key: aws.String(rb.Key),
			Body: bytes.NewReader(evil), ContentType: aws.String("application/pdf"),
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Adopt(ctx, rb); err == nil {
			t.Errorf("Adopt of an upload whose bytes changed after Resolve succeeded")
		}

		// A's document must still be A's bytes.
		got, err := b.store.Get(ctx, aRef)
		if err != nil {
			if errors.Is(err, ErrIntegrity) {
				t.Fatalf("caller A's adopted document at %s was overwritten by caller B's Adopt: %v", aRef.Key, err)
			}
			t.Fatalf("caller A's adopted document: %v", err)
		}
		if !bytes.Equal(got, doc) {
			t.Fatalf("caller A's document changed")
		}
	})
}

// TestPutInputRenewsTheLifecycleClock: inputs/<sha256> expires by a
// lifecycle rule counted from the object's creation (template.yaml).
// PutInput is If-None-Match: *, so a new task whose input has the same
// bytes as one submitted days ago gets a 412 and references the OLD
// object. Unless PutInput then renews it, the lifecycle deletes it on the
// old object's schedule, not the new task's: an input repeated daily (a
// standing prompt) would be deleted under a task accepted near the end of
// the rule's term — its worker would find the input gone (accepted, then
// lost: DESIGN §1.1), and its view and its regenerates would break for the
// rest of its retention. (Adopt uses CopyObject, which renews the clock
// itself; a regenerate's PlaceInput of the parent's input relies on
// PutInput.)
//
// The test waits (by polling a probe object, not by sleeping) until the
// emulator's clock has moved past the first write's second, puts the same
// input again, and asks that the object's LastModified moved too.
func TestPutInputRenewsTheLifecycleClock(t *testing.T) {
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		body := bytes.Repeat([]byte(`{"prompt":"the standing daily report"}`), 200)
		r, err := b.store.PutInput(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		modified := func(key string) time.Time {
			t.Helper()
			h, err := b.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.store.Bucket()), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			return aws.ToTime(h.LastModified)
		}
		first := modified(r.Key)
		// Await the emulator's clock passing first (LastModified has
		// one-second resolution).
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; ; i++ {
			probe := "probe/" + strconv.Itoa(i)
			if _, err := b.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.store.Bucket()), Key: aws.String(probe), Body: bytes.NewReader([]byte("p"))}); err != nil {
				t.Fatal(err)
			}
			if modified(probe).After(first) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the emulator's clock did not advance")
			}
		}
		if _, err := b.store.PutInput(ctx, body); err != nil {
			t.Fatal(err)
		}
		if again := modified(r.Key); !again.After(first) {
			t.Fatalf("a second task's PutInput of the same bytes left %s last modified at %v: the lifecycle deletes it on the first task's schedule", r.Key, again)
		}
	})
}
