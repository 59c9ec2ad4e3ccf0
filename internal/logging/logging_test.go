package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

func TestRequestIDAndRedaction(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := New(&buf, "debug")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	log.InfoContext(ctx, "hello", "task_id", "t_1", "api_key", "sk-live-123", "prompt", "my secret plan", "input_bytes", 12)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %q", buf.String())
	}
	if m["request_id"] != "req-1" || m["task_id"] != "t_1" || m["input_bytes"] != float64(12) {
		t.Fatalf("log line = %v", m)
	}
	if strings.Contains(buf.String(), "sk-live-123") || strings.Contains(buf.String(), "secret plan") {
		t.Fatalf("secret or task text leaked: %s", buf.String())
	}
}
