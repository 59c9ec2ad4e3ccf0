package tasklist

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// Page cursors of the caller-facing lists (ListByOwner,
// ListAwaitingApproval) are opaque to clients: base64url of a small JSON
// position, a dot, and a MAC over the list's name, the viewer's scope and
// that position. A cursor is only ever accepted back by the same list for
// the same viewer: one a client altered, or took from another caller, is
// ErrBadCursor. The MAC is a second lock, not the only one: the viewer's
// scope always comes from the request (never from the cursor), so even a
// valid position only continues a list inside the viewer's own partition.
//
// The MAC key is derived from ledger.Config.IDKey (the deployment's server
// secret); a ledger without one (tests, tools) uses a fixed key, which
// still ties a cursor to its viewer and list but does not stop a forger
// who read this file.

const cursorMACBytes = 16

// cursorKey is the MAC key of page cursors.
func (r *Reader) cursorKey() []byte {
	if len(r.cfg.IDKey) == 0 {
		sum := sha256.Sum256([]byte("taskledger page cursor, unkeyed ledger"))
		return sum[:]
	}
	m := hmac.New(sha256.New, r.cfg.IDKey)
	m.Write([]byte("taskledger page cursor"))
	return m.Sum(nil)
}

func (r *Reader) cursorMAC(list, viewer string, payload []byte) []byte {
	m := hmac.New(sha256.New, r.cursorKey())
	m.Write([]byte(list + "\x00" + viewer + "\x00"))
	m.Write(payload)
	return m.Sum(nil)[:cursorMACBytes]
}

// sealCursor encodes pos as list's cursor for viewer.
func (r *Reader) sealCursor(list, viewer string, pos any) (string, error) {
	payload, err := json.Marshal(pos)
	if err != nil {
		return "", fmt.Errorf("tasklist: encode page cursor: %w", err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(r.cursorMAC(list, viewer, payload)), nil
}

// MaxCursorBytes bounds a page cursor a list accepts.
const MaxCursorBytes = 4096

// openCursor decodes list's cursor c for viewer into pos; "" leaves pos
// as it is (the first page). Errors wrap ErrBadCursor.
func (r *Reader) openCursor(list, viewer, c string, pos any) error {
	if c == "" {
		return nil
	}
	if len(c) > MaxCursorBytes {
		return fmt.Errorf("%w: over %d bytes", ErrBadCursor, MaxCursorBytes)
	}
	p64, m64, ok := strings.Cut(c, ".")
	enc := base64.RawURLEncoding
	payload, perr := enc.DecodeString(p64)
	mac, merr := enc.DecodeString(m64)
	if !ok || perr != nil || merr != nil || !hmac.Equal(mac, r.cursorMAC(list, viewer, payload)) {
		return fmt.Errorf("%w: not a cursor this list gave this caller", ErrBadCursor)
	}
	if err := json.Unmarshal(payload, pos); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCursor, err)
	}
	return nil
}
