package payload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// DefaultInlineLimit is the largest payload kept in the task item: 4 KiB.
// Anything larger goes to S3 (see the package doc for the write-unit
// arithmetic).
const DefaultInlineLimit = 4 << 10

// MaxObjectSize bounds what Get reads into memory and what PutInput and
// PutResult accept: 8 MiB.
const MaxObjectSize = 8 << 20

// Typed errors. Every error the Store returns wraps one of these or is
// steered by pkg/retrypolicy (transient S3 trouble is Retryable/Throttled).
var (
	// ErrNotFound: the referenced object does not exist (deleted by a
	// lifecycle rule, or never written). Steered PermanentConfig: a person
	// must look.
	ErrNotFound = errors.New("payload: object not found")
	// ErrIntegrity: the object's size or SHA-256 is not what the reference
	// says. Steered PermanentConfig: retrying reads the same bytes.
	ErrIntegrity = errors.New("payload: integrity check failed")
	// ErrConflict: a result object already exists for this assignment with
	// different content.
	ErrConflict = errors.New("payload: a different object already exists at this key")
	// ErrTooLarge: the body exceeds MaxObjectSize. Steered PermanentInput.
	ErrTooLarge = errors.New("payload: body too large")
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// InlineLimit is the largest payload Place keeps inline; default
	// DefaultInlineLimit. Negative means "always offload".
	InlineLimit int
	// PresignEndpoint, when set, is the endpoint presigned upload URLs
	// name (path-style) instead of the client's: the local stack's
	// same-origin proxy to its emulator, so the page's PUT is not
	// cross-origin. "" in a deployment.
	PresignEndpoint string
}

// Store writes and reads payloads in one S3 bucket.
type Store struct {
	s3              *s3.Client
	bucket          string
	inline          int
	presignEndpoint string
}

// New returns a Store for bucket. The client must be configured as the
// deployment needs (path-style addressing for emulators).
func New(client *s3.Client, bucket string, o Options) (*Store, error) {
	if !validBucket(bucket) {
		return nil, fmt.Errorf("payload: bucket %q is not a valid S3 bucket name", bucket)
	}
	inline := o.InlineLimit
	switch {
	case inline == 0:
		inline = DefaultInlineLimit
	case inline < 0:
		inline = -1
	}
	return &Store{s3: client, bucket: bucket, inline: inline, presignEndpoint: o.PresignEndpoint}, nil
}

// Bucket returns the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// InlineLimit returns the configured inline threshold (-1: none inline).
func (s *Store) InlineLimit() int { return s.inline }

// Inline reports whether a payload of n bytes stays in the item.
func (s *Store) Inline(n int) bool { return n <= s.inline }

// Value is a payload as the item holds it: either the bytes inline or a
// reference to S3 — exactly one is set.
type Value struct {
	Inline []byte
	Ref    *Ref
}

// PlaceInput keeps a small input inline (no S3 call at all) and writes a
// larger one with PutInput. Call it before writing the item.
func (s *Store) PlaceInput(ctx context.Context, body []byte) (Value, error) {
	if s.Inline(len(body)) {
		return Value{Inline: body}, nil
	}
	r, err := s.PutInput(ctx, body)
	if err != nil {
		return Value{}, err
	}
	return Value{Ref: &r}, nil
}

// PlaceResult is PlaceInput for a result of one assignment of the task
// created at createdMs (Task.CreatedMs).
func (s *Store) PlaceResult(ctx context.Context, taskID string, createdMs, assignmentVersion int64, body []byte) (Value, error) {
	if s.Inline(len(body)) {
		return Value{Inline: body}, nil
	}
	r, err := s.PutResult(ctx, taskID, createdMs, assignmentVersion, body)
	if err != nil {
		return Value{}, err
	}
	return Value{Ref: &r}, nil
}

// Load returns v's bytes: the inline ones, or Get of the reference.
func (s *Store) Load(ctx context.Context, v Value) ([]byte, error) {
	if v.Ref == nil {
		return v.Inline, nil
	}
	return s.Get(ctx, *v.Ref)
}

// InputKey is where an input with the given hex SHA-256 lives.
func InputKey(sha string) string { return "inputs/" + sha }

// ResultKey is where the result of one assignment of a task lives:
// results/<task_id>/<created_ms>/<assignment_version>. The task id alone
// does not name one task: once TTL has deleted a finished item, the same
// idempotency key re-creates the task under the same id at
// assignment_version 0, while the old task's results stay for 38 days. The
// creation time (Task.CreatedMs, set by every create) tells the two apart,
// so a re-created task's first assignment never meets the old one's object.
func ResultKey(taskID string, createdMs, assignmentVersion int64) string {
	return "results/" + taskID + "/" + strconv.FormatInt(createdMs, 10) + "/" + strconv.FormatInt(assignmentVersion, 10)
}

// PutInput writes body to inputs/<sha256>, content-addressed, with the
// SHA-256 checksum S3 verifies and If-None-Match: * — an object already
// there has the same bytes (its key is their hash), so a second put is a
// no-op success. Errors: ErrTooLarge; transient S3 trouble steered
// Retryable/Throttled (the put is idempotent, so a lost reply is safe to
// retry).
func (s *Store) PutInput(ctx context.Context, body []byte) (Ref, error) {
	if len(body) > MaxObjectSize {
		return Ref{}, retrypolicy.Permanent(fmt.Errorf("%w: %d bytes, max %d", ErrTooLarge, len(body), MaxObjectSize))
	}
	r := Ref{Bucket: s.bucket, SHA256: Digest(body), Size: int64(len(body))}
	r.Key = InputKey(r.SHA256)
	exists, err := s.putNew(ctx, r, body)
	if err != nil {
		return Ref{}, err
	}
	if exists {
		// Same key, same content by construction: renew the object so the
		// lifecycle counts the retention window from this task, not from
		// the first task with these bytes.
		if err := s.Renew(ctx, r); err != nil {
			return Ref{}, err
		}
	}
	return r, nil
}

// Renew restarts the lifecycle clock of an existing content-addressed
// object (inputs/<sha256>): S3 expires objects counted from their
// creation, so a task referencing bytes an older task wrote would
// otherwise lose them on the older task's schedule. It copies the object
// onto itself (MetadataDirective REPLACE, the same bytes) and checks the
// size of what is there, so a truncated object left by some other writer
// is caught. Idempotent: a retry after a lost reply renews again. Errors:
// ErrBadRef, ErrNotFound (the object is gone), ErrIntegrity, transient S3
// trouble steered by pkg/retrypolicy.
func (s *Store) Renew(ctx context.Context, r Ref) error {
	if err := r.Validate(); err != nil || r.Bucket != s.bucket || r.Key != InputKey(r.SHA256) {
		return retrypolicy.Permanent(fmt.Errorf("%w: not an input of this store", ErrBadRef))
	}
	if _, err := s.s3.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(r.Key),
		CopySource:        aws.String(s.bucket + "/" + r.Key),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
		ContentType:       aws.String("application/octet-stream"),
		MetadataDirective: s3types.MetadataDirectiveReplace,
	}); err != nil {
		return s.steer("renew "+r.Key, err)
	}
	return s.checkHead(ctx, r)
}

// exists reports whether an object is at key.
func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	_, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, s.steer("head "+key, err)
}

func isPreconditionFailed(err error) bool {
	return statusOf(err) == http.StatusPreconditionFailed || codeOf(err) == "PreconditionFailed"
}

// PutResult writes body to results/<task_id>/<created_ms>/<assignment_version>
// (ResultKey; createdMs is the task's Task.CreatedMs). Only the worker
// holding that assignment of that task writes that key; a fenced-out
// worker's object is an orphan no item references. A repeated put of the
// same bytes (a retry after a lost reply) succeeds; different bytes at the
// same key are ErrConflict (steered PermanentConfig).
func (s *Store) PutResult(ctx context.Context, taskID string, createdMs, assignmentVersion int64, body []byte) (Ref, error) {
	if !validID(taskID) {
		return Ref{}, retrypolicy.Permanent(fmt.Errorf("payload: task id %q must be 1-128 of [A-Za-z0-9_-]", taskID))
	}
	if createdMs < 1 {
		return Ref{}, retrypolicy.Permanent(fmt.Errorf("payload: task creation time %d must be positive", createdMs))
	}
	if assignmentVersion < 1 {
		return Ref{}, retrypolicy.Permanent(fmt.Errorf("payload: assignment version %d must be positive", assignmentVersion))
	}
	if len(body) > MaxObjectSize {
		return Ref{}, retrypolicy.Permanent(fmt.Errorf("%w: %d bytes, max %d", ErrTooLarge, len(body), MaxObjectSize))
	}
	r := Ref{Bucket: s.bucket, Key: ResultKey(taskID, createdMs, assignmentVersion), SHA256: Digest(body), Size: int64(len(body))}
	exists, err := s.putNew(ctx, r, body)
	if err != nil {
		return Ref{}, err
	}
	if exists {
		// A retry after a lost reply finds its own bytes; anything else is
		// a conflict.
		_, err := s.Get(ctx, r)
		if errors.Is(err, ErrIntegrity) {
			return Ref{}, retrypolicy.Misconfigured(fmt.Errorf("%w: %s", ErrConflict, r.Key))
		}
		if err != nil {
			return Ref{}, err
		}
	}
	return r, nil
}

// putNew puts body at r.Key unless an object is there; exists reports a
// 412 (something was already there).
func (s *Store) putNew(ctx context.Context, r Ref, body []byte) (exists bool, err error) {
	_, err = s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(r.Key),
		Body:           bytes.NewReader(body),
		ContentLength:  aws.Int64(r.Size),
		ChecksumSHA256: aws.String(checksumOf(r.SHA256)),
		IfNoneMatch:    aws.String("*"),
		ContentType:    aws.String("application/octet-stream"),
	})
	if err == nil {
		return false, nil
	}
	if isPreconditionFailed(err) {
		return true, nil
	}
	return false, s.steer("put "+r.Key, err)
}

// Get reads the object r names and verifies its size and SHA-256. Errors:
// ErrBadRef (r invalid, or another bucket), ErrNotFound and ErrIntegrity
// (both steered PermanentConfig), transient S3 trouble steered
// Retryable/Throttled.
func (s *Store) Get(ctx context.Context, r Ref) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, retrypolicy.Permanent(err)
	}
	if r.Bucket != s.bucket {
		return nil, retrypolicy.Permanent(fmt.Errorf("%w: bucket %q is not this store's", ErrBadRef, r.Bucket))
	}
	if r.Size > MaxObjectSize {
		return nil, retrypolicy.Permanent(fmt.Errorf("%w: reference says %d bytes, max %d", ErrTooLarge, r.Size, MaxObjectSize))
	}
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(r.Key)})
	if err != nil {
		return nil, s.steer("get "+r.Key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, r.Size+1))
	if err != nil {
		return nil, retrypolicy.Retryable(fmt.Errorf("payload: read %s: %w", r.Key, err))
	}
	if int64(len(body)) != r.Size {
		return nil, retrypolicy.Misconfigured(fmt.Errorf("%w: %s: size differs from the reference's %d", ErrIntegrity, r.Key, r.Size))
	}
	if Digest(body) != r.SHA256 {
		return nil, retrypolicy.Misconfigured(fmt.Errorf("%w: %s: sha256 differs from the reference", ErrIntegrity, r.Key))
	}
	return body, nil
}

// checkHead compares an existing object's size with r's.
func (s *Store) checkHead(ctx context.Context, r Ref) error {
	h, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(r.Key)})
	if err != nil {
		return s.steer("head "+r.Key, err)
	}
	if aws.ToInt64(h.ContentLength) != r.Size {
		return retrypolicy.Misconfigured(fmt.Errorf("%w: %s: size differs from the reference's %d", ErrIntegrity, r.Key, r.Size))
	}
	return nil
}

// steer is the one place S3 errors are classified. Not found → ErrNotFound
// (PermanentConfig). Otherwise pkg/retrypolicy decides, except that an
// uncertain outcome is Retryable here: every write the Store makes is
// idempotent (a fixed key and If-None-Match), so repeating it is safe.
func (s *Store) steer(what string, err error) error {
	if isNotFound(err) {
		return retrypolicy.Misconfigured(fmt.Errorf("%w: %s", ErrNotFound, strings.TrimPrefix(what, "get ")))
	}
	wrapped := fmt.Errorf("payload: %s: %w", what, err)
	c := retrypolicy.Classify(err)
	switch c.Class {
	case retrypolicy.Transient, retrypolicy.UnknownOutcome:
		if c.RetryAfter > 0 || codeOf(err) == "SlowDown" {
			return retrypolicy.Throttled(wrapped, c.RetryAfter)
		}
		return retrypolicy.Retryable(wrapped)
	case retrypolicy.PermanentInput:
		return retrypolicy.Permanent(wrapped)
	}
	return retrypolicy.Misconfigured(wrapped)
}

func isNotFound(err error) bool {
	var nsk *s3types.NoSuchKey
	var nf *s3types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	c := codeOf(err)
	return c == "NoSuchKey" || c == "NotFound" || statusOf(err) == http.StatusNotFound && c != "NoSuchBucket"
}

func codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func statusOf(err error) int {
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}

func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
