package soak

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// documentItemLimit bounds the item of a task with a document: the
// documents are 5-12 KiB (documentBytes), so an item under 4 KiB holds
// references only.
const documentItemLimit = 4 << 10

// Documents (DESIGN §12): rules on the document kinds.
//
//   - document_not_referenced: the task references exactly the uploaded
//     document (SHA-256 and size of the accepted bytes) under
//     inputs/<sha256>, and the object there is those bytes
//     (payload.Get verifies);
//   - document_not_read: a completed task's result is the simulated
//     provider's reply naming exactly that SHA-256 and size, computed over
//     the bytes the provider was handed;
//   - document_item_large: the item stays under 4 KiB (documents by
//     reference, never the bytes);
//   - document_replay_not_same_task: the same key and the same document
//     again answers 200, replayed, the same task;
//   - document_version_not_rejected: the same key with another version of
//     the document answers 422 idempotency-key-reused;
//   - altered_upload_not_rejected / altered_upload_wrote: bytes other than
//     the declared ones answer 422 upload-mismatch, the task does not exist
//     right after, and the key's later submit with the right bytes is a
//     fresh 202.
func (c *checker) document(t *task, st *ledger.Task) {
	if !isDocument(t.kind) {
		return
	}
	s := c.s
	d := s.docs[t.id]
	if d == nil {
		return
	}
	rec := s.records[t.id]
	rec.mu.Lock()
	finals := map[string]call{}
	for k, v := range rec.finals {
		finals[k] = v
	}
	rec.mu.Unlock()
	sum := sha256.Sum256(d.doc)
	sha, size := hex.EncodeToString(sum[:]), int64(len(d.doc))

	if t.kind == DocumentAltered && d.altered {
		if cl := finals["altered"]; cl.status != http.StatusUnprocessableEntity || cl.problem != api.TypeUploadMismatch {
			c.add(t.kind, t.id, "altered_upload_not_rejected", "a submit naming bytes other than the declared ones answered %d %s, want 422 upload-mismatch", cl.status, cl.problem)
		}
		if a, ok := finals["a"]; !d.absentAfter || (ok && a.status/100 == 2 && a.status != http.StatusAccepted) {
			c.add(t.kind, t.id, "altered_upload_wrote", "after the refused submit the task existed (%t absent) or the key's next submit was a replay (%d)", d.absentAfter, a.status)
		}
	}
	if t.kind == Document {
		if cl, ok := finals["dup"]; ok && (cl.status != http.StatusOK || !cl.replayed || cl.taskID != t.id) {
			c.add(t.kind, t.id, "document_replay_not_same_task", "the same key and document again answered %d (replayed %t, task %q)", cl.status, cl.replayed, cl.taskID)
		}
		if cl, ok := finals["b"]; ok && (cl.status != http.StatusUnprocessableEntity || cl.problem != api.TypeIdempotencyKeyReused) {
			c.add(t.kind, t.id, "document_version_not_rejected", "the same key with another version of the document answered %d %s, want 422 idempotency-key-reused", cl.status, cl.problem)
		}
	}
	if st == nil {
		return
	}
	if len(st.Documents) != 1 || st.Documents[0].Ref.SHA256 != sha || st.Documents[0].Ref.Size != size || st.Documents[0].Ref.Key != "inputs/"+sha {
		c.add(t.kind, t.id, "document_not_referenced", "documents %+v, want one of sha256 %s, %d bytes under inputs/", st.Documents, sha, size)
	} else if _, err := s.load(&st.Documents[0].Ref); err != nil {
		c.add(t.kind, t.id, "document_not_referenced", "the document object does not match its reference: %v", err)
	}
	if st.State == ledger.StateCompleted && !strings.Contains(s.storedResult(st), "sha256:"+sha+" bytes:"+strconv.FormatInt(size, 10)+"]") {
		c.add(t.kind, t.id, "document_not_read", "the result does not name the document's sha256 and size")
	}
	if n, err := s.itemSize(t.id); err != nil || n > documentItemLimit {
		c.add(t.kind, t.id, "document_item_large", "the item is %d bytes (%v), want under %d: the document by reference", n, err, documentItemLimit)
	}
}

// itemSize is the stored size of task id's item by DynamoDB's rules.
func (s *soak) itemSize(id string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.cleanDB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.env.Names.TasksTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"task_id": &types.AttributeValueMemberS{Value: id}},
	})
	if err != nil {
		return 0, err
	}
	return itemsize.Item(out.Item), nil
}
