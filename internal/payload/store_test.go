package payload

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestPlaceSmallMakesNoS3Call(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		const created = 1700000000000
		small := bytes.Repeat([]byte("a"), DefaultInlineLimit)
		v, err := b.store.PlaceInput(ctx, small)
		if err != nil || v.Ref != nil || !bytes.Equal(v.Inline, small) {
			t.Fatalf("PlaceInput(small) = %+v, %v; want inline", v, err)
		}
		r, err := b.store.PlaceResult(ctx, "task1", created, 1, []byte("ok"))
		if err != nil || r.Ref != nil {
			t.Fatalf("PlaceResult(small) = %+v, %v; want inline", r, err)
		}
		if got, err := b.store.Load(ctx, v); err != nil || !bytes.Equal(got, small) {
			t.Fatalf("Load(inline) = %d bytes, %v", len(got), err)
		}
		if calls := b.counter.Calls(); len(calls) != 0 {
			t.Fatalf("small payloads made AWS calls: %v", calls)
		}
		big := append(small, 'b')
		v, err = b.store.PlaceInput(ctx, big)
		if err != nil || v.Ref == nil || v.Inline != nil {
			t.Fatalf("PlaceInput(threshold+1) = %+v, %v; want a reference", v, err)
		}
		if got := b.counter.Calls()["S3.PutObject"]; got != 1 {
			t.Fatalf("S3.PutObject calls = %d, want 1 (%v)", got, b.counter.Calls())
		}
		if got, err := b.store.Load(ctx, v); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("Load(ref) = %d bytes, %v", len(got), err)
		}
	})
}

func TestPutInputContentAddressed(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		body := bytes.Repeat([]byte("input "), 2000)
		r1, err := b.store.PutInput(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		if r1.Key != "inputs/"+Digest(body) || r1.Size != int64(len(body)) || r1.SHA256 != Digest(body) || r1.Bucket != b.store.Bucket() {
			t.Fatalf("ref = %+v", r1)
		}
		r2, err := b.store.PutInput(ctx, body)
		if err != nil {
			t.Fatalf("second put of the same content: %v (want a no-op success)", err)
		}
		if r2 != r1 {
			t.Fatalf("second ref %+v != first %+v", r2, r1)
		}
		got, err := b.store.Get(ctx, r1)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("Get = %d bytes, %v", len(got), err)
		}
	})
}

func TestPutResultKeyedByAssignment(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		const created = 1700000000000 // the task's created_ms
		stale := bytes.Repeat([]byte("stale "), 1000)
		fresh := bytes.Repeat([]byte("fresh "), 1000)
		rs, err := b.store.PutResult(ctx, "task-1", created, 1, stale)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := b.store.PutResult(ctx, "task-1", created, 2, fresh)
		if err != nil {
			t.Fatal(err)
		}
		if rs.Key != "results/task-1/1700000000000/1" || rf.Key != "results/task-1/1700000000000/2" {
			t.Fatalf("keys %q %q", rs.Key, rf.Key)
		}
		if got, err := b.store.Get(ctx, rf); err != nil || !bytes.Equal(got, fresh) {
			t.Fatalf("Get(assignment 2) = %q…, %v", got[:min(len(got), 10)], err)
		}
		// A retry after a lost reply: same bytes, same key → success.
		if again, err := b.store.PutResult(ctx, "task-1", created, 2, fresh); err != nil || again != rf {
			t.Fatalf("repeat PutResult = %+v, %v", again, err)
		}
		// Other bytes at the same assignment's key never replace the object.
		_, err = b.store.PutResult(ctx, "task-1", created, 2, stale)
		if !errors.Is(err, ErrConflict) || !errors.Is(err, &retrypolicy.Error{Class: retrypolicy.PermanentConfig}) {
			t.Fatalf("conflicting PutResult: %v, want ErrConflict (PermanentConfig)", err)
		}
		if got, err := b.store.Get(ctx, rf); err != nil || !bytes.Equal(got, fresh) {
			t.Fatalf("after conflict, Get = %v", err)
		}
		if _, err := b.store.PutResult(ctx, "../x", created, 1, fresh); !errors.Is(err, &retrypolicy.Error{Class: retrypolicy.PermanentInput}) {
			t.Fatalf("bad task id: %v", err)
		}
		if _, err := b.store.PutResult(ctx, "task-1", 0, 1, fresh); !errors.Is(err, &retrypolicy.Error{Class: retrypolicy.PermanentInput}) {
			t.Fatalf("no creation time: %v", err)
		}
	})
}

// A task id names one task only while its item exists: after TTL deletes a
// finished task, the same idempotency key re-creates it under the same id,
// starting again at assignment_version 0, while the old task's results stay
// for 38 days. Keyed by creation time as well, the new incarnation's first
// result is a new object, not a conflict with the old one's.
func TestPutResultOfARecreatedTaskDoesNotMeetTheOldTasksObject(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		const first, second = 1700000000000, 1700000000000 + 8*24*3600*1000
		old := bytes.Repeat([]byte("old "), 2000)
		cur := bytes.Repeat([]byte("new "), 2000)
		ro, err := b.store.PutResult(ctx, "task-again", first, 1, old)
		if err != nil {
			t.Fatal(err)
		}
		rn, err := b.store.PutResult(ctx, "task-again", second, 1, cur)
		if err != nil {
			t.Fatalf("the re-created task's first result: %v, want it saved beside the old task's", err)
		}
		if ro.Key == rn.Key || rn.Key != ResultKey("task-again", second, 1) {
			t.Fatalf("keys %q and %q, want %q for the re-created task", ro.Key, rn.Key, ResultKey("task-again", second, 1))
		}
		for _, c := range []struct {
			r    Ref
			want []byte
		}{{ro, old}, {rn, cur}} {
			if got, err := b.store.Get(ctx, c.r); err != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("Get(%s) = %d bytes, %v; want its own %d", c.r.Key, len(got), err, len(c.want))
			}
		}
	})
}

func TestGetVerifies(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		body := bytes.Repeat([]byte("x"), 9000)
		r, err := b.store.PutInput(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		// Tamper with the object behind the store's back.
		other := bytes.Repeat([]byte("y"), 9000)
		if _, err := b.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(r.Key), Body: bytes.NewReader(other)}); err != nil {
			t.Fatal(err)
		}
		_, err = b.store.Get(ctx, r)
		if !errors.Is(err, ErrIntegrity) || !errors.Is(err, &retrypolicy.Error{Class: retrypolicy.PermanentConfig}) {
			t.Fatalf("Get(tampered) = %v, want ErrIntegrity (PermanentConfig)", err)
		}
		short := r
		short.Size--
		if _, err := b.store.Get(ctx, short); !errors.Is(err, ErrIntegrity) {
			t.Fatalf("Get(size mismatch) = %v, want ErrIntegrity", err)
		}
		missing := r
		missing.Key = "inputs/" + strings.Repeat("0", 64)
		if _, err := b.store.Get(ctx, missing); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
		}
		foreign := r
		foreign.Bucket = "some-other-bucket"
		if _, err := b.store.Get(ctx, foreign); !errors.Is(err, ErrBadRef) {
			t.Fatalf("Get(other bucket) = %v, want ErrBadRef", err)
		}
	})
}
