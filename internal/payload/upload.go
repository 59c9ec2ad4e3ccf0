package payload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Format is one accepted document type.
type Format struct {
	// Name is the short name (the Bedrock Converse document/image format).
	Name string
	// ContentType is the exact Content-Type the upload must declare.
	ContentType string
	// MaxSize is the largest accepted upload in bytes.
	MaxSize int64
}

// Document and image limits follow the Bedrock Converse API's per-item
// limits (4.5 MB per document, 3.75 MB per image), so anything accepted
// here can be handed to a provider unchanged.
const (
	MaxDocumentSize = 4_500_000
	MaxImageSize    = 3_750_000
)

// Formats is the upload allow-list, keyed by Content-Type.
var Formats = map[string]Format{
	"application/pdf": {"pdf", "application/pdf", MaxDocumentSize},
	"text/plain":      {"txt", "text/plain", MaxDocumentSize},
	"text/markdown":   {"md", "text/markdown", MaxDocumentSize},
	"text/html":       {"html", "text/html", MaxDocumentSize},
	"text/csv":        {"csv", "text/csv", MaxDocumentSize},
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", MaxDocumentSize},
	"image/png":  {"png", "image/png", MaxImageSize},
	"image/jpeg": {"jpeg", "image/jpeg", MaxImageSize},
}

// DefaultUploadExpiry is how long a presigned upload stays valid.
const DefaultUploadExpiry = 15 * time.Minute

// Upload errors. The HTTP layer (internal/api) maps them to problem+json:
// at POST /uploads ErrUploadConflict and ErrForeignUpload are 409
// upload-id-taken and ErrBadUpload 400; at a submit ErrUnknownUpload,
// ErrForeignUpload and ErrBadUpload are all 422 unknown-upload (another
// caller's id looks exactly like an unknown one), ErrNotUploaded 409
// upload-not-received, ErrUploadMismatch 422 upload-mismatch.
var (
	// ErrBadUpload: the request itself is invalid (format not allowed,
	// size out of range, malformed id, scope or checksum).
	ErrBadUpload = errors.New("payload: bad upload request")
	// ErrUnknownUpload: this caller never presigned an upload with this id
	// (another caller's use of the same id is invisible).
	ErrUnknownUpload = errors.New("payload: unknown upload id")
	// ErrForeignUpload: the intent found under this caller's key names
	// another caller (only a corrupted or hand-written intent: ids are per
	// caller, so another caller's id is simply unknown here).
	ErrForeignUpload = errors.New("payload: upload id belongs to another caller")
	// ErrUploadConflict: the id was presigned before with another
	// declaration (checksum, size or content type).
	ErrUploadConflict = errors.New("payload: upload id already used with another declaration")
	// ErrNotUploaded: presigned, but nothing has been uploaded yet.
	ErrNotUploaded = errors.New("payload: upload not yet received")
	// ErrUploadMismatch: what arrived is not what was declared (size,
	// SHA-256 or content type).
	ErrUploadMismatch = errors.New("payload: upload does not match its declaration")
)

// UploadRequest declares an upload.
type UploadRequest struct {
	// Scope identifies the caller (the authorizer's subject or API key id);
	// only its hash is stored.
	Scope string
	// UploadID is chosen by the caller of PresignUpload (1-128 of
	// [A-Za-z0-9_-]); unique per upload.
	UploadID string
	// SHA256 is the lowercase hex SHA-256 of the exact bytes to upload.
	SHA256 string
	// Size is their count.
	Size int64
	// ContentType must be a key of Formats.
	ContentType string
	// Expiry defaults to DefaultUploadExpiry; at most 1 hour.
	Expiry time.Duration
}

// Upload is a presigned PUT. The client sends Method to URL with exactly
// Header (which the signature covers: Content-Length, Content-Type and
// x-amz-checksum-sha256) and the declared bytes as the body.
type Upload struct {
	UploadID  string
	Method    string
	URL       string
	Header    http.Header
	ExpiresAt time.Time
}

// intent is what PresignUpload records at upload-intents/<id>.
type intent struct {
	ScopeHash   string `json:"scope_hash"`
	Key         string `json:"key"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
}

// IntentKey is where a caller's declaration of an upload is recorded:
// upload ids are per caller (another caller's ids are neither visible nor
// taken), so the key carries the caller's scope hash like UploadKey.
func IntentKey(scope, uploadID string) string {
	return "upload-intents/" + ScopeHash(scope) + "/" + uploadID
}

// UploadKey is where the bytes of a caller's upload land.
func UploadKey(scope, uploadID string) string { return "uploads/" + ScopeHash(scope) + "/" + uploadID }

// ScopeHash is the stored form of a caller scope: 32 hex digits of its
// SHA-256 (the scope itself never reaches S3 keys or logs).
func ScopeHash(scope string) string { return Digest([]byte("taskledger-scope\x00" + scope))[:32] }

func (r UploadRequest) validate() (Format, error) {
	f, ok := Formats[r.ContentType]
	switch {
	case r.Scope == "" || len(r.Scope) > 512:
		return f, fmt.Errorf("%w: caller scope must be 1-512 bytes", ErrBadUpload)
	case !validID(r.UploadID):
		return f, fmt.Errorf("%w: upload id must be 1-128 of [A-Za-z0-9_-]", ErrBadUpload)
	case !ok:
		return f, fmt.Errorf("%w: content type %q is not accepted (pdf, txt, md, html, csv, docx, png, jpeg)", ErrBadUpload, r.ContentType)
	case !validHex256(r.SHA256):
		return f, fmt.Errorf("%w: sha256 must be 64 lowercase hex digits", ErrBadUpload)
	case r.Size < 1 || r.Size > f.MaxSize:
		return f, fmt.Errorf("%w: size must be 1-%d bytes for %s", ErrBadUpload, f.MaxSize, f.Name)
	case r.Expiry < 0 || r.Expiry > time.Hour:
		return f, fmt.Errorf("%w: expiry must be at most 1h", ErrBadUpload)
	}
	return f, nil
}

// PresignUpload records the declaration (at IntentKey, If-None-Match: *)
// and returns a presigned PUT for UploadKey whose signature binds the
// exact Content-Length, the Content-Type and the SHA-256 checksum, so S3
// rejects a larger body (signature mismatch) or other bytes (BadDigest).
// Presigning the same id again with the same scope and declaration returns
// a fresh URL. Errors: ErrBadUpload, ErrForeignUpload, ErrUploadConflict,
// transient S3 trouble steered by pkg/retrypolicy.
func (s *Store) PresignUpload(ctx context.Context, req UploadRequest) (Upload, error) {
	if _, err := req.validate(); err != nil {
		return Upload{}, err
	}
	expiry := req.Expiry
	if expiry == 0 {
		expiry = DefaultUploadExpiry
	}
	in := intent{ScopeHash: ScopeHash(req.Scope), Key: UploadKey(req.Scope, req.UploadID), SHA256: req.SHA256, Size: req.Size, ContentType: req.ContentType}
	if err := s.recordIntent(ctx, req.Scope, req.UploadID, in); err != nil {
		return Upload{}, err
	}
	signed, err := s.presigner().PresignPutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(in.Key),
		ContentLength:  aws.Int64(req.Size),
		ContentType:    aws.String(req.ContentType),
		ChecksumSHA256: aws.String(checksumOf(req.SHA256)),
	}, s3.WithPresignExpires(expiry))
	if err != nil {
		return Upload{}, fmt.Errorf("payload: presign %s: %w", req.UploadID, err)
	}
	h := http.Header{}
	for k, vs := range signed.SignedHeader {
		if http.CanonicalHeaderKey(k) == "Host" {
			continue
		}
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return Upload{UploadID: req.UploadID, Method: signed.Method, URL: signed.URL, Header: h, ExpiresAt: time.Now().Add(expiry)}, nil
}

func (s *Store) recordIntent(ctx context.Context, scope, uploadID string, in intent) error {
	body, _ := json.Marshal(in)
	key := IntentKey(scope, uploadID)
	_, err := s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(key),
		Body:           bytes.NewReader(body),
		ContentLength:  aws.Int64(int64(len(body))),
		ChecksumSHA256: aws.String(checksumOf(Digest(body))),
		ContentType:    aws.String("application/json"),
		IfNoneMatch:    aws.String("*"),
	})
	if err == nil {
		return nil
	}
	if statusOf(err) != http.StatusPreconditionFailed && codeOf(err) != "PreconditionFailed" {
		return s.steer("put "+key, err)
	}
	old, err := s.readIntent(ctx, scope, uploadID)
	if err != nil {
		return err
	}
	if old.ScopeHash != in.ScopeHash {
		return fmt.Errorf("%w: %s", ErrForeignUpload, uploadID)
	}
	if old != in {
		return fmt.Errorf("%w: %s", ErrUploadConflict, uploadID)
	}
	return nil
}

func (s *Store) readIntent(ctx context.Context, scope, uploadID string) (intent, error) {
	key := IntentKey(scope, uploadID)
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return intent{}, fmt.Errorf("%w: %s", ErrUnknownUpload, uploadID)
		}
		return intent{}, s.steer("get "+key, err)
	}
	defer out.Body.Close()
	var in intent
	dec := json.NewDecoder(io.LimitReader(out.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return intent{}, retrypolicy.Misconfigured(fmt.Errorf("%w: %s: unreadable upload intent: %v", ErrIntegrity, key, err))
	}
	return in, nil
}

// Resolve returns the reference to a finished upload of this caller.
// It checks everything against the declaration, whatever the bucket
// enforced: the size and content type by HEAD, the SHA-256 by the checksum
// S3 stored (HEAD with checksum mode) or, when the store did not keep one
// (an emulator), by reading the object and hashing it. Errors:
// ErrBadUpload, ErrUnknownUpload, ErrForeignUpload, ErrNotUploaded,
// ErrUploadMismatch, transient S3 trouble steered by pkg/retrypolicy.
func (s *Store) Resolve(ctx context.Context, scope, uploadID string) (Ref, error) {
	ref, _, err := s.ResolveDocument(ctx, scope, uploadID)
	return ref, err
}

// ResolveDocument is Resolve that also returns the declared format.
func (s *Store) ResolveDocument(ctx context.Context, scope, uploadID string) (Ref, Format, error) {
	ref, in, err := s.resolveIntent(ctx, scope, uploadID)
	if err != nil {
		return Ref{}, Format{}, err
	}
	return ref, Formats[in.ContentType], nil
}

func (s *Store) resolveIntent(ctx context.Context, scope, uploadID string) (Ref, intent, error) {
	if scope == "" || len(scope) > 512 || !validID(uploadID) {
		return Ref{}, intent{}, fmt.Errorf("%w: caller scope must be 1-512 bytes and upload id 1-128 of [A-Za-z0-9_-]", ErrBadUpload)
	}
	in, err := s.readIntent(ctx, scope, uploadID)
	if err != nil {
		return Ref{}, intent{}, err
	}
	if in.ScopeHash != ScopeHash(scope) {
		return Ref{}, intent{}, fmt.Errorf("%w: %s", ErrForeignUpload, uploadID)
	}
	h, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:       aws.String(s.bucket),
		Key:          aws.String(in.Key),
		ChecksumMode: s3types.ChecksumModeEnabled,
	})
	if err != nil {
		if isNotFound(err) {
			return Ref{}, intent{}, fmt.Errorf("%w: %s", ErrNotUploaded, uploadID)
		}
		return Ref{}, intent{}, s.steer("head "+in.Key, err)
	}
	if got := aws.ToInt64(h.ContentLength); got != in.Size {
		return Ref{}, intent{}, fmt.Errorf("%w: %s: %d bytes arrived, %d declared", ErrUploadMismatch, uploadID, got, in.Size)
	}
	if got := aws.ToString(h.ContentType); got != in.ContentType {
		return Ref{}, intent{}, fmt.Errorf("%w: %s: content type %q arrived, %q declared", ErrUploadMismatch, uploadID, got, in.ContentType)
	}
	ref := Ref{Bucket: s.bucket, Key: in.Key, SHA256: in.SHA256, Size: in.Size}
	if sum := hexOfChecksum(aws.ToString(h.ChecksumSHA256)); sum != "" {
		if sum != in.SHA256 {
			return Ref{}, intent{}, fmt.Errorf("%w: %s: sha256 differs from the declared one", ErrUploadMismatch, uploadID)
		}
		return ref, in, nil
	}
	if _, err := s.Get(ctx, ref); err != nil {
		if errors.Is(err, ErrIntegrity) {
			return Ref{}, intent{}, fmt.Errorf("%w: %s: sha256 differs from the declared one", ErrUploadMismatch, uploadID)
		}
		return Ref{}, intent{}, err
	}
	return ref, in, nil
}

// Adopt copies a resolved upload to inputs/<sha256> (server side, no
// bytes through the function) and returns the content-addressed reference
// the task item should keep, so the uploads/ prefix can expire after a day
// while the task's input lives for the retention window. Call it with the
// Ref Resolve returned, before writing the item.
//
// inputs/<sha256> is shared by every task with those bytes, so Adopt never
// writes other bytes there. It checks the upload's bytes again (the
// SHA-256 S3 stored, or, on an emulator that keeps none, by reading them:
// another PUT may have replaced them since Resolve), copies only that
// version (CopySourceIfMatch on its ETag) and never over an existing
// content address (If-None-Match: *; an object already there has the same
// bytes by construction and is renewed instead, see [Store.Renew]). The
// emulators do not enforce both (kumo v0.33 evaluates CopySourceIfMatch
// but ignores If-None-Match on CopyObject; moto 5.2 ignores both on a
// copy), so the source is verified right before the copy, the destination
// HEADed first, and the result read back and verified (size and SHA-256)
// like any Get; on S3 the two conditions close the remaining races. Errors: ErrBadRef, ErrUploadMismatch (the
// upload's bytes are not the declared ones any more), ErrNotFound,
// ErrIntegrity, transient S3 trouble steered by pkg/retrypolicy.
func (s *Store) Adopt(ctx context.Context, upload Ref) (Ref, error) {
	if err := upload.Validate(); err != nil || upload.Bucket != s.bucket {
		return Ref{}, retrypolicy.Permanent(fmt.Errorf("%w: not an upload in this store", ErrBadRef))
	}
	dst := Ref{Bucket: s.bucket, Key: InputKey(upload.SHA256), SHA256: upload.SHA256, Size: upload.Size}
	etag, err := s.verifiedETag(ctx, upload)
	if err != nil {
		return Ref{}, err
	}
	exists, err := s.exists(ctx, dst.Key)
	if err != nil {
		return Ref{}, err
	}
	if !exists {
		var appeared bool
		if appeared, err = s.copyNew(ctx, upload, dst, etag); err != nil {
			return Ref{}, err
		}
		exists = appeared
	}
	if exists {
		// Same bytes by construction (the key is their hash): renew its
		// lifecycle clock for this task. The lifecycle may delete it
		// between the HEAD and the renew (S3 expires asynchronously): then
		// the upload is copied as if it had never been there.
		err := s.Renew(ctx, dst)
		if errors.Is(err, ErrNotFound) {
			err = s.copyUpload(ctx, upload, dst, etag)
		}
		if err != nil {
			return Ref{}, err
		}
	}
	if _, err := s.Get(ctx, dst); err != nil {
		return Ref{}, err
	}
	return dst, nil
}

// copyNew copies the verified upload (etag) to the content address dst,
// on the conditions that the upload is still that version and dst does
// not exist. appeared reports that dst appeared meanwhile (same bytes by
// construction); an upload that changed is ErrUploadMismatch.
func (s *Store) copyNew(ctx context.Context, upload, dst Ref, etag string) (appeared bool, err error) {
	_, err = s.s3.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(dst.Key),
		CopySource:        aws.String(s.bucket + "/" + upload.Key),
		CopySourceIfMatch: aws.String(etag),
		IfNoneMatch:       aws.String("*"),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
		ContentType:       aws.String("application/octet-stream"),
		MetadataDirective: s3types.MetadataDirectiveReplace,
	})
	switch {
	case err == nil:
		return false, nil
	case isPreconditionFailed(err):
		// Either the upload changed since it was checked or the content
		// address appeared meanwhile: tell which.
		if err := s.sameETag(ctx, upload, etag); err != nil {
			return false, err
		}
		return true, nil
	default:
		return false, s.steer("copy "+upload.Key+" to "+dst.Key, err)
	}
}

// copyUpload copies the upload to dst after the content address vanished
// under a renew; if it appeared again meanwhile, it is renewed.
func (s *Store) copyUpload(ctx context.Context, upload, dst Ref, etag string) error {
	appeared, err := s.copyNew(ctx, upload, dst, etag)
	if err != nil || !appeared {
		return err
	}
	return s.Renew(ctx, dst)
}

// verifiedETag returns the ETag of the upload's current version after
// checking that its bytes are the declared ones: by the SHA-256 checksum
// S3 stored (HEAD), or by reading and hashing them when there is none.
func (s *Store) verifiedETag(ctx context.Context, upload Ref) (string, error) {
	h, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(upload.Key), ChecksumMode: s3types.ChecksumModeEnabled,
	})
	if err != nil {
		return "", s.steer("head "+upload.Key, err)
	}
	changed := retrypolicy.Permanent(fmt.Errorf("%w: %s no longer holds the declared bytes", ErrUploadMismatch, upload.Key))
	if aws.ToInt64(h.ContentLength) != upload.Size {
		return "", changed
	}
	if sum := hexOfChecksum(aws.ToString(h.ChecksumSHA256)); sum != "" {
		if sum != upload.SHA256 {
			return "", changed
		}
		return aws.ToString(h.ETag), nil
	}
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(upload.Key)})
	if err != nil {
		return "", s.steer("get "+upload.Key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, upload.Size+1))
	if err != nil {
		return "", retrypolicy.Retryable(fmt.Errorf("payload: read %s: %w", upload.Key, err))
	}
	if int64(len(body)) != upload.Size || Digest(body) != upload.SHA256 {
		return "", changed
	}
	return aws.ToString(out.ETag), nil
}

// sameETag reports ErrUploadMismatch when the upload's current ETag is
// not the one Adopt verified (other bytes were PUT since).
func (s *Store) sameETag(ctx context.Context, upload Ref, etag string) error {
	h, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(upload.Key)})
	if err != nil {
		return s.steer("head "+upload.Key, err)
	}
	if aws.ToString(h.ETag) != etag {
		return retrypolicy.Permanent(fmt.Errorf("%w: %s changed while it was copied", ErrUploadMismatch, upload.Key))
	}
	return nil
}
