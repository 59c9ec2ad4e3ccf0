package lambdaenv

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/taskledger/taskledger/internal/payload"
)

func TestPayloads(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "PAYLOAD_BUCKET" {
				return v
			}
			return ""
		}
	}
	st, err := Payloads(aws.Config{Region: "us-east-1"}, env(""))
	if err != nil || st != nil {
		t.Fatalf("unset PAYLOAD_BUCKET: got %v, %v; want nil store (no claim-check), no error", st, err)
	}
	st, err = Payloads(aws.Config{Region: "us-east-1"}, env("my-payloads"))
	if err != nil || st == nil || st.Bucket() != "my-payloads" || st.InlineLimit() != payload.DefaultInlineLimit {
		t.Fatalf("PAYLOAD_BUCKET=my-payloads: got %v, %v", st, err)
	}
	if _, err := Payloads(aws.Config{Region: "us-east-1"}, env("Not_A_Bucket")); err == nil || !strings.Contains(err.Error(), "PAYLOAD_BUCKET") {
		t.Fatalf("invalid bucket name: err = %v, want one naming PAYLOAD_BUCKET", err)
	}
}
