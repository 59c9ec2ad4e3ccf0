package lambdaenv

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TaskIDKey reads a real secret (moto's Secrets Manager), and refuses a
// missing, absent or short one without ever printing its value.
func TestTaskIDKey(t *testing.T) {
	e := testenv.New(t, "moto")
	sm := secretsmanager.NewFromConfig(e.AWS)
	ctx := context.Background()
	put := func(name, value string) string {
		out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(testenv.UniquePrefix() + name), SecretString: aws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		return *out.ARN
	}
	good := strings.Repeat("k9", 32)
	key, err := TaskIDKey(ctx, sm, put("good", " "+good+"\n"))
	if err != nil || string(key) != good {
		t.Fatalf("TaskIDKey = %d bytes, %v", len(key), err)
	}
	short := put("short", "tooshort")
	if _, err := TaskIDKey(ctx, sm, short); err == nil || strings.Contains(err.Error(), "tooshort") || !strings.Contains(err.Error(), short) {
		t.Fatalf("short secret: %v", err)
	}
	if _, err := TaskIDKey(ctx, sm, "arn:aws:secretsmanager:us-east-1:123456789012:secret:absent-AbCdEf"); err == nil {
		t.Fatal("an absent secret was accepted")
	}
	if _, err := TaskIDKey(ctx, sm, ""); err == nil || !strings.Contains(err.Error(), "TASK_ID_KEY_SECRET_ARN") {
		t.Fatalf("no ARN: %v", err)
	}
}
