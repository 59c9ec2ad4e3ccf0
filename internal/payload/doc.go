// Package payload is the S3 claim-check store (DESIGN §12). The
// submit handler (internal/api) places large inputs and resolves offloaded
// results for the task view; the worker reads offloaded inputs and places
// large results before its fenced completion; both take a *Store as their
// Payloads field (nil: everything inline). The ledger keeps the reference
// as ledger.PayloadRef (input_ref, result_ref). Presigned document uploads
// are wired too: internal/api serves POST /uploads (PresignUpload) and
// resolves and adopts the documents a submit names (ResolveDocument, Adopt;
// the item keeps ledger.DocumentRef), and the worker reads them for the
// provider. Options.PresignEndpoint lets the local stack sign upload URLs
// for its same-origin proxy.
//
// # Why the hot item stays small
//
// DynamoDB bills an UpdateItem by the larger of the item's size before and
// after, one write unit per started KB. The task item is updated on every
// claim, heartbeat and completion, so an item carrying a 30 KB prompt costs
// 31 write units per update where a 1 KB item costs 2. Payloads above an
// inline threshold (DefaultInlineLimit, 4 KiB; Options.InlineLimit) go to
// S3 and the item keeps a [Ref] {bucket, key, sha256, size} — JSON
// {"bucket","key","sha256","size"} via [ParseRef], DynamoDB map
// {bucket:S, key:S, sha256:S, size:N} via [Ref.Attribute] and
// [RefFromAttribute], both parsed strictly. A payload at or under the
// threshold stays inline and makes no S3 call at all ([Store.PlaceInput],
// [Store.PlaceResult]). [PlanOffload] is the item-level backstop: given an
// attribute map, the payload attributes that may move, and the ledger's
// item-size function, it picks what goes to S3 so the item stays under
// [DefaultItemBudget] (400 KB less 50 KiB of headroom for what the item
// gains later), or returns [ErrItemTooLarge].
//
// # Write ordering and key layout
//
//   - inputs/<sha256>: content-addressed, written BEFORE the item that
//     references it, with x-amz-checksum-sha256 (S3 verifies the bytes) and
//     If-None-Match: * (an existing object has the same bytes; a second put
//     writes nothing new and succeeds, so a retry after a lost reply is
//     safe). A put that finds the object there renews it ([Store.Renew]: a
//     copy onto itself), so the lifecycle counts from the newest task that
//     references those bytes, not the first.
//   - results/<task_id>/<created_ms>/<assignment_version>: written by the
//     worker holding that assignment BEFORE its fenced completion update.
//     created_ms (Task.CreatedMs) tells apart two tasks with one id: once
//     TTL has deleted a finished item, the same idempotency key re-creates
//     the task at assignment_version 0 while the old results stay 38 days,
//     so without it the new task's first result would meet the old one's
//     object (ErrConflict). A fenced-out worker's object is never
//     referenced by the item: an orphan, not the answer. The same bytes
//     again succeed; other bytes are [ErrConflict].
//   - upload-intents/<scope_hash>/<upload_id>: a caller's declaration of
//     a presigned upload (caller-scope hash, sha256, size, content type),
//     If-None-Match: *. Upload ids are per caller: another caller using the
//     same id is neither visible nor in the way.
//   - uploads/<scope_hash>/<upload_id>: the uploaded document.
//
// [Store.Get] verifies size and SHA-256 against the reference (a mismatch
// is [ErrIntegrity], a missing object [ErrNotFound], both steered
// PermanentConfig; throttles, 5xx and lost replies are steered
// Retryable/Throttled through pkg/retrypolicy — every write here is
// idempotent, so an uncertain outcome is safe to repeat).
//
// # Documents
//
// [Store.PresignUpload] returns a presigned PUT whose signature covers
// Content-Length, Content-Type and x-amz-checksum-sha256: S3 rejects a body
// of another length (SignatureDoesNotMatch) or other bytes (BadDigest).
// [Store.Resolve](scope, upload id) returns the [Ref] or [ErrUnknownUpload],
// [ErrForeignUpload], [ErrNotUploaded], [ErrUploadMismatch] — re-checking
// size and content type by HEAD and the SHA-256 by the stored checksum or,
// when the store kept none, by reading the object. kumo and moto check
// neither presigned signatures nor checksums, so on them Resolve is what
// catches an oversized or altered upload (the tests assert it). A task
// then references the document through [Store.Adopt], a server-side copy
// to inputs/<sha256>, so uploads/ can expire after a day. Adopt checks
// the upload's bytes again and copies only that version (its ETag;
// CopySourceIfMatch) and never
// over an existing inputs/<sha256> (If-None-Match: *; one already there is
// renewed instead), and reads the copy back, because the emulators do not
// enforce both copy conditions (kumo ignores If-None-Match on a copy, moto
// both). The documents' SHA-256, size and content type join the task's
// payload hash (internal/api), so the same key with another version of a
// document is a 422.
//
// Formats ([Formats]): pdf, txt, md, html, csv, docx up to
// [MaxDocumentSize] (4.5 MB), png and jpeg up to [MaxImageSize] (3.75 MB) —
// the Bedrock Converse per-document and per-image limits. Uploads expire
// after [DefaultUploadExpiry] (15 min, at most 1 h).
//
// # Lifecycle and bucket security (for the template wiring)
//
// Orphans exist by design (a fenced-out worker's result, an input whose
// item write failed, an intent never used, an upload never referenced), so
// the bucket needs lifecycle rules (template.yaml): upload-intents/ and
// uploads/ expire after 1 day (a task's document is copied under inputs/);
// results/ after 38 days and inputs/ (and any other prefix) after 39 —
// longer than an item may reference them: a gated task waits up to 30
// days for its approval, then is kept the 7-day retention window;
// incomplete multipart uploads abort after 1 day. The bucket is encrypted (SSE-S3 or
// SSE-KMS), has every public-access block on, a policy denying
// aws:SecureTransport=false, BucketOwnerEnforced ownership, and per
// function least privilege (internal/templatetest proves it): submit
// s3:PutObject on inputs/*, upload-intents/*, uploads/* (presigning needs
// PutObject on uploads/*), GetObject on those and on results/* (the task
// view), and s3:ListBucket on the bucket (so a missing key is a 404, not a
// 403); worker GetObject on inputs/* and results/*, PutObject on
// results/*; reconciler PutObject and GetObject on results/* (a large
// read-back result). Nobody deletes.
// Keys carry ids and hashes only: never task text or the caller scope
// itself (only [ScopeHash]).
package payload
