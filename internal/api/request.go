package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/provider/contract"
)

// Request limits (the API document publishes them).
const (
	// MaxBody is the largest accepted request body, in bytes (413 above it).
	MaxBody = 64 << 10
	// MaxInput is the largest accepted task input, in bytes of its canonical
	// JSON form, which is what the ledger stores (413 above it).
	MaxInput = 32 << 10
	// MaxIdempotencyKey is the longest accepted Idempotency-Key.
	MaxIdempotencyKey = 255
	// MaxCorrelationID is the longest accepted X-Correlation-Id.
	MaxCorrelationID = 128
)

// Header names (lower-case, as API Gateway delivers them).
const (
	HeaderIdempotencyKey     = "idempotency-key"
	HeaderCorrelationID      = "x-correlation-id"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
	responseCorrelationName  = "X-Correlation-Id"
)

type limits struct{ body, input int }

// submission is a validated POST /tasks or POST /tasks/{id}/regenerate.
type submission struct {
	key           string
	correlationID string
	kind          string // submit only; a regenerate takes the parent's
	// plan is the approval gate and deliver plan (submit only; a
	// regenerate takes the parent's).
	plan plan
	// input is the canonical JSON of the task input; "" for a regenerate
	// that reuses its parent's input.
	input string
	// budget is the submit's spend budget (nil: none; spend.go).
	budget *budgetSpec
	// documents are the upload ids a generate task references (documents.go).
	documents []string
}

// lowerHeaders returns h with lower-case names. API Gateway already
// lower-cases them; hand-written events may not.
func lowerHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

// printable reports whether s is 1..max printable ASCII characters
// (0x20-0x7E) without leading or trailing spaces.
func printable(s string, max int) bool {
	if len(s) == 0 || len(s) > max || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func idempotencyKey(h map[string]string) (string, *Problem) {
	k, ok := h[HeaderIdempotencyKey]
	if !ok || k == "" {
		return "", newProblem(TypeIdempotencyKeyMissing, http.StatusBadRequest, "Idempotency-Key required",
			"Send an Idempotency-Key header (1-255 printable ASCII characters, e.g. a UUID) and reuse it when retrying the same request.").
			withField("Idempotency-Key")
	}
	if !printable(k, MaxIdempotencyKey) {
		return "", newProblem(TypeIdempotencyKeyInvalid, http.StatusBadRequest, "Invalid Idempotency-Key",
			fmt.Sprintf("The Idempotency-Key must be 1-%d printable ASCII characters (0x20-0x7E) without leading or trailing spaces; got %d bytes.", MaxIdempotencyKey, len(k))).
			withField("Idempotency-Key")
	}
	return k, nil
}

func correlationID(h map[string]string) (string, *Problem) {
	c := h[HeaderCorrelationID]
	if c == "" {
		return "", nil
	}
	if !printable(c, MaxCorrelationID) {
		return "", newProblem(TypeCorrelationIDInvalid, http.StatusBadRequest, "Invalid X-Correlation-Id",
			fmt.Sprintf("X-Correlation-Id must be 1-%d printable ASCII characters without leading or trailing spaces, or absent.", MaxCorrelationID)).
			withField("X-Correlation-Id")
	}
	return c, nil
}

func bodyTooLarge(n, max int) *Problem {
	return newProblem(TypeBodyTooLarge, http.StatusRequestEntityTooLarge, "Request body too large",
		fmt.Sprintf("The request body is %d bytes; at most %d are accepted.", n, max))
}

// decodeBody returns the request body, base64-decoded when API Gateway
// encoded it, and enforces the body cap.
func decodeBody(body string, isBase64 bool, max int) ([]byte, *Problem) {
	if !isBase64 {
		if len(body) > max {
			return nil, bodyTooLarge(len(body), max)
		}
		return []byte(body), nil
	}
	if n := base64.StdEncoding.DecodedLen(len(body)); n > max+3 {
		return nil, bodyTooLarge(n, max)
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, newProblem(TypeMalformedJSON, http.StatusBadRequest, "Malformed request body",
			"The request body was marked base64-encoded but is not valid base64.")
	}
	if len(b) > max {
		return nil, bodyTooLarge(len(b), max)
	}
	return b, nil
}

// requireJSON checks Content-Type is application/json (charset utf-8 if given).
func requireJSON(h map[string]string) *Problem {
	ct := h["content-type"]
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return newProblem(TypeUnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type",
			"The request body must be JSON, sent with Content-Type: application/json.").withField("Content-Type")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return newProblem(TypeUnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type",
			"The request body must be UTF-8 JSON (charset=utf-8 or no charset).").withField("Content-Type")
	}
	return nil
}

func invalidBody(field, detail string) *Problem {
	return newProblem(TypeInvalidBody, http.StatusBadRequest, "Invalid request body", detail).withField(field)
}

func malformed(detail string) *Problem {
	return newProblem(TypeMalformedJSON, http.StatusBadRequest, "Malformed JSON", detail)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// parseObject reads body as exactly one JSON object whose members are all
// in allowed, each at most once.
func parseObject(body []byte, allowed ...string) (map[string]json.RawMessage, *Problem) {
	if !utf8.Valid(body) {
		return nil, malformed("The request body is not valid UTF-8.")
	}
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, malformed(fmt.Sprintf("The request body is not valid JSON (at byte %d).", se.Offset))
		}
		return nil, malformed("The request body is not valid JSON.")
	}
	trimmed := bytes.TrimSpace(body)
	if trimmed[0] != '{' {
		return nil, invalidBody("", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return nil, malformed("The request body is not valid JSON.")
	}
	out := make(map[string]json.RawMessage, len(allowed))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("The request body is not valid JSON.")
		}
		key, _ := tok.(string)
		if !slices.Contains(allowed, key) {
			return nil, invalidBody(clip(key, 40), fmt.Sprintf("Unknown field %q; the allowed fields are %s.", clip(key, 40), strings.Join(allowed, ", ")))
		}
		if _, dup := out[key]; dup {
			return nil, invalidBody(key, fmt.Sprintf("Field %q appears more than once.", key))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, malformed("The request body is not valid JSON.")
		}
		out[key] = raw
	}
	return out, nil
}

// parseInput validates the "input" member of a generate task and returns
// its canonical form.
func parseInput(raw json.RawMessage, present bool, max int) (string, *Problem) {
	return parseInputOf(contract.KindGenerate, raw, present, max)
}

// parseInputOf validates the "input" member of a task of kind and returns
// its canonical form.
func parseInputOf(kind string, raw json.RawMessage, present bool, max int) (string, *Problem) {
	if !present || bytes.Equal(raw, []byte("null")) {
		return "", invalidBody("input", `Field "input" is required and must be a JSON object.`)
	}
	if raw[0] != '{' {
		return "", invalidBody("input", `Field "input" must be a JSON object.`)
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return "", malformed("The task input is not valid JSON.")
	}
	if len(canon) > max {
		return "", newProblem(TypeInputTooLarge, http.StatusRequestEntityTooLarge, "Task input too large",
			fmt.Sprintf("The task input is %d bytes in canonical JSON form; at most %d are accepted.", len(canon), max)).withField("input")
	}
	if kind == deliver.Kind {
		return string(canon), deliverInputProblem(canon)
	}
	if _, err := contract.ParseGenerateInput(raw); err != nil {
		var ie *contract.InputError
		if !errors.As(err, &ie) {
			return "", newProblem(TypeInvalidInput, http.StatusBadRequest, "Invalid task input", "The task input is not valid.").withField("input")
		}
		field := "input"
		if ie.Field != "" {
			field += "." + ie.Field
		}
		typ, title := inputProblem(ie.Code) // conversation.go
		return "", newProblem(typ, http.StatusBadRequest, title, field+": "+ie.Problem).withField(field)
	}
	return string(canon), nil
}

// parseSubmit validates a POST /tasks request: body cap, media type,
// Idempotency-Key, X-Correlation-Id, then the body
// {"kind":"generate","input":{...}} with the input within its cap and valid
// for its kind.
func parseSubmit(h map[string]string, body []byte, lim limits) (submission, *Problem) {
	var s submission
	if len(body) > lim.body {
		return s, bodyTooLarge(len(body), lim.body)
	}
	if p := requireJSON(h); p != nil {
		return s, p
	}
	var p *Problem
	if s.key, p = idempotencyKey(h); p != nil {
		return s, p
	}
	if s.correlationID, p = correlationID(h); p != nil {
		return s, p
	}
	if p = reservedKey(s.key); p != nil {
		return s, p
	}
	fields, p := parseObject(body, "kind", "input", "approval", "deliver", "budget", "documents")
	if p != nil {
		return s, p
	}
	rawKind, ok := fields["kind"]
	if !ok {
		return s, invalidBody("kind", `Field "kind" is required: "generate" or "deliver".`)
	}
	if json.Unmarshal(rawKind, &s.kind) != nil || (s.kind != contract.KindGenerate && s.kind != deliver.Kind) {
		return s, invalidBody("kind", `Field "kind" must be "generate" or "deliver".`)
	}
	rawInput, ok := fields["input"]
	if s.input, p = parseInputOf(s.kind, rawInput, ok, lim.input); p != nil {
		return s, p
	}
	if rawBudget, ok := fields["budget"]; ok {
		if s.budget, p = parseBudget(rawBudget); p != nil {
			return s, p
		}
		if p = budgetCoversOneCall(s.budget, rawInput); p != nil {
			return s, p
		}
	}
	if s.plan, p = parsePlan(fields); p != nil {
		return s, p
	}
	if s.documents, p = parseDocuments(fields, s.kind); p != nil {
		return s, p
	}
	return s, nil
}

// parseRegenerate validates a POST /tasks/{id}/regenerate request. The body
// is optional: empty or {} reuses the parent's input, {"input":{...}}
// replaces it.
func parseRegenerate(h map[string]string, body []byte, lim limits) (submission, *Problem) {
	var s submission
	if len(body) > lim.body {
		return s, bodyTooLarge(len(body), lim.body)
	}
	hasBody := len(bytes.TrimSpace(body)) > 0
	if hasBody {
		if p := requireJSON(h); p != nil {
			return s, p
		}
	}
	var p *Problem
	if s.key, p = idempotencyKey(h); p != nil {
		return s, p
	}
	if s.correlationID, p = correlationID(h); p != nil {
		return s, p
	}
	if p = reservedKey(s.key); p != nil {
		return s, p
	}
	if !hasBody {
		return s, nil
	}
	fields, p := parseObject(body, "input")
	if p != nil {
		return s, p
	}
	if rawInput, ok := fields["input"]; ok {
		if s.input, p = parseInput(rawInput, true, lim.input); p != nil {
			return s, p
		}
	}
	return s, nil
}

// CanonicalJSON returns raw (one JSON value) with object keys sorted, no
// insignificant whitespace, numbers exactly as written and no HTML escaping.
// Two documents that differ only in key order or whitespace have the same
// canonical form.
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("api: trailing data after the JSON value")
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// PayloadSHA256 is the hex SHA-256 the ledger compares to tell a replay from
// a reused key: over the canonical JSON of
// {"input":<input>,"kind":<kind>[,"parent_task_id":<parent>]}.
func PayloadSHA256(kind string, input json.RawMessage, parentTaskID string) (string, error) {
	canon, err := CanonicalJSON(input)
	if err != nil {
		return "", fmt.Errorf("api: payload hash: %w", err)
	}
	return payloadHash(kind, string(canon), parentTaskID), nil
}

// payloadHash hashes an input already in canonical form.
func payloadHash(kind, canonicalInput, parentTaskID string) string {
	var b bytes.Buffer
	b.WriteString(`{"input":`)
	b.WriteString(canonicalInput)
	b.WriteString(`,"kind":`)
	b.Write(jsonString(kind))
	if parentTaskID != "" {
		b.WriteString(`,"parent_task_id":`)
		b.Write(jsonString(parentTaskID))
	}
	b.WriteByte('}')
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
