package payload

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestAttack13AdoptNeverRewritesAnotherTasksDocument (adversarial review
// of issue 13): inputs/<sha256> is shared by every task whose input or
// document has those bytes, so nothing may ever write other bytes there.
// Adopt copies uploads/<scope>/<id> over inputs/<sha256> unconditionally
// (no If-None-Match, no CopySourceIfMatch on the object Resolve checked),
// so an upload whose bytes change between Resolve and Adopt — a second PUT
// to the same key (kumo and moto, and the local stack's unsigned /s3
// proxy, accept any bytes; the same caller may presign the same id again)
// — replaces caller A's document with caller B's bytes. B's submit then
// fails its own verification, but A's task reads a document that no
// longer matches its reference (document_unavailable) or, for a task
// already referencing it, is gone for good.
//
// Smallest fix: Adopt copies only the object Resolve verified
// (CopySourceIfMatch: the ETag from Resolve's HEAD, carried with the Ref)
// and never over an existing content address (IfNoneMatch "*" on the
// CopyObject, a 412 meaning "already there, same bytes by construction";
// or skip the copy when inputs/<sha> exists).
func TestAttack13AdoptNeverRewritesAnotherTasksDocument(t *testing.T) {
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
