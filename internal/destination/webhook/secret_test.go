package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// TestSecretsManagerSecret reads an endpoint's signing secret from Secrets
// Manager on each emulator, delivers with it (the receiver verifies with the
// independent library), caches it, and re-reads after the TTL or an
// invalidation.
func TestSecretsManagerSecret(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		ctx := context.Background()
		sm := secretsmanager.NewFromConfig(be.AWS)
		prefix := testenv.UniquePrefix()
		secret := newSecret(t)
		created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "-webhook"), SecretString: aws.String(secret)})
		if err != nil {
			t.Fatalf("CreateSecret: %v", err)
		}
		malformed, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "-malformed"), SecretString: aws.String("not-a-whsec-0451")})
		if err != nil {
			t.Fatalf("CreateSecret: %v", err)
		}
		t.Cleanup(func() {
			for _, arn := range []*string{created.ARN, malformed.ARN} {
				_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: arn, ForceDeleteWithoutRecovery: aws.Bool(true)})
			}
		})

		clock := testenv.NewClock(time.Now())
		src := webhook.SecretsManager(sm, time.Minute, clock.Now)
		rcv := newReceiver(t, secret)
		h, err := webhook.New(webhook.Options{
			Endpoints: map[string]webhook.Endpoint{
				"crm":       {URL: rcv.srv.URL + "/hooks", SecretID: aws.ToString(created.ARN)},
				"missing":   {URL: rcv.srv.URL + "/hooks", SecretID: "arn:aws:secretsmanager:us-east-1:123456789012:secret:" + prefix + "-absent-AbCdEf"},
				"malformed": {URL: rcv.srv.URL + "/hooks", SecretID: aws.ToString(malformed.ARN)},
			},
			Secrets:    src,
			HTTPClient: rcv.srv.Client(),
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, op := range []string{"task-a", "task-b"} {
			if _, err := h.Deliver(ctx, req(op, "crm")); err != nil {
				t.Fatalf("Deliver %s: %v", op, err)
			}
			if n := rcv.Deliveries(op); n != 1 {
				t.Fatalf("%s: receiver verified %d deliveries", op, n)
			}
			if src.Reads() != 1 {
				t.Fatalf("after %d deliveries Secrets Manager was read %d times, want 1 (cached)", i+1, src.Reads())
			}
		}
		clock.Advance(time.Minute)
		if _, err := h.Deliver(ctx, req("task-c", "crm")); err != nil || src.Reads() != 2 {
			t.Fatalf("after the TTL: %v, %d reads (want 2)", err, src.Reads())
		}
		src.Invalidate(aws.ToString(created.ARN))
		if _, err := h.Deliver(ctx, req("task-d", "crm")); err != nil || src.Reads() != 3 {
			t.Fatalf("after Invalidate: %v, %d reads (want 3)", err, src.Reads())
		}
		if rcv.badSigs != 0 {
			t.Fatalf("%d deliveries failed verification", rcv.badSigs)
		}

		for _, ep := range []string{"missing", "malformed"} {
			_, err := h.Deliver(ctx, req("task-"+ep, ep))
			if c := retrypolicy.Classify(err); c.Class != retrypolicy.PermanentConfig {
				t.Errorf("%s secret: err %v class %v, want permanent_config", ep, err, c.Class)
			}
			if err != nil && strings.Contains(err.Error(), "0451") {
				t.Errorf("%s secret: error quotes the secret value: %v", ep, err)
			}
		}
		if rcv.requests != 4 {
			t.Fatalf("receiver got %d requests, want 4 (none without a good secret)", rcv.requests)
		}
	})
}
