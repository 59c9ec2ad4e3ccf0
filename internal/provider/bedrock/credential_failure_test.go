package bedrock_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/taskledger/taskledger/internal/provider/bedrock"
	"github.com/taskledger/taskledger/internal/provider/contract"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestCredentialFailureIsNoCall (the real SDK client): a Converse whose
// credentials could not be obtained was never sent — Bedrock's endpoint
// received nothing — so retrypolicy.Refused must say so; "may have acted"
// would make the worker charge the full reservation (budget and daily
// quota) and leave a lapsed assignment to the reconciler's park. The
// adapter's two clues are both polluted by the credential provider's own
// HTTP request, which runs under the same context:
//
//   - sts (AssumeRole answering 503): the STS *awshttp.ResponseError is in
//     the chain, and read as Converse's own status 503 ("a response proves
//     the request arrived") it would be Retryable and not Refused: every
//     STS blip would burn a reservation, and a budget would park
//     budget_exhausted for spend that never happened (DESIGN §13).
//   - container (ECS/EKS credentials endpoint answering 503): the
//     WroteRequest trace hook fires for the credentials request, and read
//     as Converse's it would make the error Uncertain: the task would go
//     unknown and, with no readback, be parked unknown_outcome "whether
//     bedrock performed (and billed)" — for a call never made (DESIGN
//     §1.4, §1.6).
//
// Want: never sent → Refused, and not an unknown outcome.
func TestCredentialFailureIsNoCall(t *testing.T) {
	var converse atomic.Int64
	bed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { converse.Add(1); w.WriteHeader(500) }))
	defer bed.Close()
	credSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceUnavailable</Code><Message>down</Message></Error><RequestId>r</RequestId></ErrorResponse>`))
	}))
	defer credSrv.Close()
	stsc := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(credSrv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "SECRET", "")})
	for name, cp := range map[string]aws.CredentialsProvider{
		"sts":       aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(stsc, "arn:aws:iam::123456789012:role/worker")),
		"container": aws.NewCredentialsCache(endpointcreds.New(credSrv.URL)),
	} {
		t.Run(name, func(t *testing.T) {
			converse.Store(0)
			p, err := bedrock.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: cp, RetryMaxAttempts: 1, BaseEndpoint: aws.String(bed.URL)},
				bedrock.Options{Model: "anthropic.claude-l-test"})
			if err != nil {
				t.Fatal(err)
			}
			_, gerr := p.Generate(context.Background(), contract.Request{OperationID: "op-l", Input: json.RawMessage(`{"prompt":"write one line"}`)})
			if gerr == nil {
				t.Fatal("setup: no error")
			}
			if n := converse.Load(); n != 0 {
				t.Fatalf("setup: Bedrock received %d Converse requests; want none", n)
			}
			c := retrypolicy.Classify(gerr)
			if !retrypolicy.Refused(gerr) || c.Class == retrypolicy.UnknownOutcome {
				t.Fatalf("the Converse request was never sent (credentials: %s answered 503), yet the worker's view is class %s (%s), Refused=%v: "+
					"charged its full reservation%s (err: %v)", name, c.Class, c.Reason, retrypolicy.Refused(gerr),
					map[bool]string{true: ", sent to unknown and parked 'bedrock may have performed (and billed)'", false: ""}[c.Class == retrypolicy.UnknownOutcome], gerr)
			}
		})
	}
}
