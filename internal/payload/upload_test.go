package payload

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// put does what a browser does with an Upload: the presigned method, URL
// and headers, and body as the body.
func put(t *testing.T, u Upload, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(u.Method, u.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range u.Header {
		if http.CanonicalHeaderKey(k) == "Content-Length" {
			continue // net/http sends the body's real length
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	return resp.StatusCode, string(msg)
}

func uploadReq(scope, id string, body []byte) UploadRequest {
	return UploadRequest{Scope: scope, UploadID: id, SHA256: Digest(body), Size: int64(len(body)), ContentType: "application/pdf"}
}

func TestPresignBindsLengthAndChecksum(t *testing.T) {
	t.Parallel()
	b := setup(t, "kumo")
	body := []byte("%PDF-1.7 a small document")
	u, err := b.store.PresignUpload(context.Background(), uploadReq("caller-a", "up1", body))
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u.URL)
	if err != nil {
		t.Fatal(err)
	}
	signed := strings.Split(pu.Query().Get("X-Amz-SignedHeaders"), ";")
	for _, want := range []string{"content-length", "content-type", "x-amz-checksum-sha256", "host"} {
		if !contains(signed, want) {
			t.Errorf("X-Amz-SignedHeaders %v lacks %q: S3 would not reject a body that differs in it", signed, want)
		}
	}
	if got := u.Header.Get("X-Amz-Checksum-Sha256"); got != checksumOf(Digest(body)) {
		t.Errorf("checksum header %q, want %q", got, checksumOf(Digest(body)))
	}
	if u.Method != http.MethodPut {
		t.Errorf("method %q", u.Method)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestUploadRequestValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, "kumo")
	ok := uploadReq("caller-a", "up1", []byte("x"))
	cases := map[string]func(r *UploadRequest){
		"format not allowed": func(r *UploadRequest) { r.ContentType = "application/x-msdownload" },
		"too large":          func(r *UploadRequest) { r.Size = MaxDocumentSize + 1 },
		"image too large":    func(r *UploadRequest) { r.ContentType, r.Size = "image/png", MaxImageSize+1 },
		"empty":              func(r *UploadRequest) { r.Size = 0 },
		"bad checksum":       func(r *UploadRequest) { r.SHA256 = strings.ToUpper(r.SHA256) },
		"bad id":             func(r *UploadRequest) { r.UploadID = "../etc" },
		"no scope":           func(r *UploadRequest) { r.Scope = "" },
	}
	for name, mutate := range cases {
		r := ok
		mutate(&r)
		if _, err := b.store.PresignUpload(context.Background(), r); !errors.Is(err, ErrBadUpload) {
			t.Errorf("%s: err = %v, want ErrBadUpload", name, err)
		}
	}
	if calls := b.counter.Calls(); len(calls) != 0 {
		t.Errorf("rejected requests made AWS calls: %v", calls)
	}
}

// TestUploadLifecycle does the real upload with net/http against each
// emulator. What the emulators do NOT enforce (probed on kumo v0.33.1 and
// moto 5.2.1): neither checks a presigned URL's signature, so neither
// rejects a body longer than the signed Content-Length; neither verifies
// x-amz-checksum-sha256 on PUT, and neither returns a stored checksum on
// HEAD. S3 does all three (403 SignatureDoesNotMatch, 400 BadDigest,
// ChecksumSHA256 with checksum mode). The subtests therefore accept either
// outcome of the PUT and assert that Resolve catches what got through:
// size by HEAD, SHA-256 by reading and hashing the object.
func TestUploadLifecycle(t *testing.T) {
	t.Parallel()
	eachLeg(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		doc := bytes.Repeat([]byte("%PDF page "), 3000)

		t.Run("good upload", func(t *testing.T) {
			u, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "good", doc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.store.Resolve(ctx, "caller-a", "good"); !errors.Is(err, ErrNotUploaded) {
				t.Fatalf("Resolve before upload = %v, want ErrNotUploaded", err)
			}
			if code, msg := put(t, u, doc); code != http.StatusOK {
				t.Fatalf("upload: %d %s", code, msg)
			}
			ref, err := b.store.Resolve(ctx, "caller-a", "good")
			if err != nil {
				t.Fatal(err)
			}
			if ref.SHA256 != Digest(doc) || ref.Size != int64(len(doc)) || ref.Key != UploadKey("caller-a", "good") {
				t.Fatalf("ref = %+v", ref)
			}
			got, err := b.store.Get(ctx, ref)
			if err != nil || !bytes.Equal(got, doc) {
				t.Fatalf("Get = %v", err)
			}
			in, err := b.store.Adopt(ctx, ref)
			if err != nil {
				t.Fatalf("Adopt: %v", err)
			}
			if in.Key != InputKey(Digest(doc)) || in.SHA256 != ref.SHA256 || in.Size != ref.Size {
				t.Fatalf("adopted ref = %+v", in)
			}
			if got, err := b.store.Get(ctx, in); err != nil || !bytes.Equal(got, doc) {
				t.Fatalf("Get(adopted) = %v", err)
			}
			// Presigning the same id again (a page retry) is fine; with
			// another declaration it is a conflict.
			if _, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "good", doc)); err != nil {
				t.Fatalf("re-presign: %v", err)
			}
			if _, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "good", doc[1:])); !errors.Is(err, ErrUploadConflict) {
				t.Fatalf("re-presign with another declaration: %v, want ErrUploadConflict", err)
			}
		})

		t.Run("another caller's id", func(t *testing.T) {
			u, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "mine", doc))
			if err != nil {
				t.Fatal(err)
			}
			if code, msg := put(t, u, doc); code != http.StatusOK {
				t.Fatalf("upload: %d %s", code, msg)
			}
			// Upload ids are per caller: another caller's id is unknown
			// to B, and B may use the same id for its own upload, which
			// leaves A's untouched.
			if _, err := b.store.Resolve(ctx, "caller-b", "mine"); !errors.Is(err, ErrUnknownUpload) {
				t.Fatalf("Resolve by another caller = %v, want ErrUnknownUpload", err)
			}
			if _, err := b.store.PresignUpload(ctx, uploadReq("caller-b", "mine", doc[1:])); err != nil {
				t.Fatalf("presign by another caller of the same id = %v, want its own upload", err)
			}
			if _, err := b.store.Resolve(ctx, "caller-b", "mine"); !errors.Is(err, ErrNotUploaded) {
				t.Fatalf("Resolve of B's own, not yet uploaded id = %v, want ErrNotUploaded", err)
			}
			if ref, err := b.store.Resolve(ctx, "caller-a", "mine"); err != nil || ref.SHA256 != Digest(doc) {
				t.Fatalf("A's upload after B used the same id: %+v, %v", ref, err)
			}
		})

		t.Run("unknown id", func(t *testing.T) {
			if _, err := b.store.Resolve(ctx, "caller-a", "never-presigned"); !errors.Is(err, ErrUnknownUpload) {
				t.Fatalf("Resolve(unknown) = %v, want ErrUnknownUpload", err)
			}
		})

		t.Run("too large", func(t *testing.T) {
			u, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "big", doc))
			if err != nil {
				t.Fatal(err)
			}
			bigger := append(bytes.Clone(doc), []byte("and more")...)
			code, msg := put(t, u, bigger)
			t.Logf("%s: upload of %d bytes against a %d-byte signature: HTTP %d", b.leg, len(bigger), len(doc), code)
			_, err = b.store.Resolve(ctx, "caller-a", "big")
			if code/100 == 2 {
				// The emulator stored it (neither kumo nor moto checks the
				// presigned signature; S3 answers 403 SignatureDoesNotMatch).
				if !errors.Is(err, ErrUploadMismatch) {
					t.Fatalf("Resolve after an oversized upload = %v, want ErrUploadMismatch", err)
				}
			} else if !errors.Is(err, ErrNotUploaded) {
				t.Fatalf("rejected upload (%d %s), then Resolve = %v, want ErrNotUploaded", code, msg, err)
			}
		})

		t.Run("wrong checksum", func(t *testing.T) {
			u, err := b.store.PresignUpload(ctx, uploadReq("caller-a", "tampered", doc))
			if err != nil {
				t.Fatal(err)
			}
			other := bytes.Clone(doc)
			other[0] = 'X'
			code, msg := put(t, u, other)
			t.Logf("%s: upload with a different SHA-256: HTTP %d", b.leg, code)
			_, err = b.store.Resolve(ctx, "caller-a", "tampered")
			if code/100 == 2 {
				if !errors.Is(err, ErrUploadMismatch) {
					t.Fatalf("Resolve after a tampered upload = %v, want ErrUploadMismatch", err)
				}
			} else if !errors.Is(err, ErrNotUploaded) {
				t.Fatalf("rejected upload (%d %s), then Resolve = %v, want ErrNotUploaded", code, msg, err)
			}
		})
	})
}
