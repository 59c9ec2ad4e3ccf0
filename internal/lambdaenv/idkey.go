package lambdaenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/taskledger/taskledger/pkg/ledger"
)

// SecretValueGetter is the part of the Secrets Manager client TaskIDKey
// calls; *secretsmanager.Client implements it.
type SecretValueGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// TaskIDKey reads the server secret task ids are derived with (the
// template's TaskIdKeySecret, named by TASK_ID_KEY_SECRET_ARN) once, at
// init: its SecretString, surrounding space trimmed, of at least
// ledger.MinIDKeyBytes bytes. Errors name the secret, never its value.
func TaskIDKey(ctx context.Context, sm SecretValueGetter, secretARN string) (ledger.SecretKey, error) {
	if secretARN == "" {
		return nil, Missing("TASK_ID_KEY_SECRET_ARN")
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &secretARN})
	if err != nil {
		return nil, fmt.Errorf("read the task id key from secret %s: %w", secretARN, err)
	}
	if out.SecretString == nil {
		return nil, fmt.Errorf("secret %s has no SecretString", secretARN)
	}
	key := strings.TrimSpace(*out.SecretString)
	if len(key) < ledger.MinIDKeyBytes {
		return nil, fmt.Errorf("secret %s holds %d bytes: the task id key needs at least %d", secretARN, len(key), ledger.MinIDKeyBytes)
	}
	return ledger.SecretKey(key), nil
}
