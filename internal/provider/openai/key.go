package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// DefaultSecretTTL is how long SecretsManagerKey caches a key.
const DefaultSecretTTL = 15 * time.Minute

// KeySource supplies the API key for each call.
type KeySource interface {
	// APIKey returns the key. Errors are steered with pkg/retrypolicy
	// (Misconfigured when the key is absent or unreadable, Retryable when
	// reading it failed transiently) and never contain the key.
	APIKey(ctx context.Context) (string, error)
}

// Invalidator is implemented by key sources that cache. The provider calls
// Invalidate with a key the server rejected (401), so that the next APIKey
// reads a fresh one: a rotated secret is picked up without a restart.
type Invalidator interface {
	Invalidate(rejected string)
}

// redacted holds a credential. Every fmt verb and slog print it as
// "[REDACTED]", so a struct that holds one can be printed safely.
type redacted string

// Format prints "[REDACTED]" for every verb.
func (redacted) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "[REDACTED]") }

// LogValue keeps the value out of slog output.
func (redacted) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// EnvKey reads the key from the environment variable name at each call;
// getenv is os.Getenv if nil.
func EnvKey(name string, getenv func(string) string) KeySource {
	if getenv == nil {
		getenv = os.Getenv
	}
	return envKey{name: name, getenv: getenv}
}

type envKey struct {
	name   string
	getenv func(string) string
}

func (k envKey) APIKey(context.Context) (string, error) {
	if k.name == "" {
		return "", retrypolicy.Misconfigured(errors.New("openai: no API key environment variable configured"))
	}
	v := strings.TrimSpace(k.getenv(k.name))
	if v == "" {
		return "", retrypolicy.Misconfigured(fmt.Errorf("openai: API key environment variable %s is empty or unset", k.name))
	}
	return v, nil
}

// String names the variable, not its value.
func (k envKey) String() string { return "env:" + k.name }

// GoString is String.
func (k envKey) GoString() string { return k.String() }

// SecretValueGetter is the part of the Secrets Manager client SecretsManagerKey
// uses; *secretsmanager.Client implements it.
type SecretValueGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretsManagerKey reads the key from a Secrets Manager secret (an ARN or a
// name) and caches it for ttl (DefaultSecretTTL if 0). The secret string is
// either the key itself or a JSON object with an "api_key" string member.
// The returned source implements Invalidator.
func SecretsManagerKey(client SecretValueGetter, secretID string, ttl time.Duration) KeySource {
	if ttl <= 0 {
		ttl = DefaultSecretTTL
	}
	return &secretKey{client: client, id: secretID, ttl: ttl, now: time.Now}
}

type secretKey struct {
	client SecretValueGetter
	id     string
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	key     redacted
	fetched time.Time
}

// secretConfigCodes are Secrets Manager errors that a retry cannot fix.
var secretConfigCodes = map[string]bool{
	"ResourceNotFoundException":   true,
	"AccessDeniedException":       true,
	"DecryptionFailure":           true,
	"InvalidRequestException":     true,
	"InvalidParameterException":   true,
	"UnrecognizedClientException": true,
	"InvalidSignatureException":   true,
	"ExpiredTokenException":       true,
}

func (k *secretKey) APIKey(ctx context.Context) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != "" && k.now().Sub(k.fetched) < k.ttl {
		return string(k.key), nil
	}
	out, err := k.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &k.id})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && secretConfigCodes[ae.ErrorCode()] {
			return "", retrypolicy.Misconfigured(fmt.Errorf("openai: read API key from secret %s: %w", k.id, err))
		}
		return "", retrypolicy.Retryable(fmt.Errorf("openai: read API key from secret %s: %w: %w", k.id, retrypolicy.ErrRequestNotSent, err))
	}
	if out.SecretString == nil {
		return "", retrypolicy.Misconfigured(fmt.Errorf("openai: secret %s has no SecretString", k.id))
	}
	key, err := keyFromSecret(*out.SecretString)
	if err != nil {
		return "", retrypolicy.Misconfigured(fmt.Errorf("openai: secret %s: %w", k.id, err))
	}
	k.key, k.fetched = redacted(key), k.now()
	return key, nil
}

func keyFromSecret(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") {
		var obj struct {
			APIKey string `json:"api_key"`
		}
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return "", errors.New(`secret string is not valid JSON (want the key, or {"api_key":"..."})`)
		}
		s = strings.TrimSpace(obj.APIKey)
		if s == "" {
			return "", errors.New(`secret JSON has no "api_key" string`)
		}
		return s, nil
	}
	if s == "" {
		return "", errors.New("secret string is empty")
	}
	return s, nil
}

// Invalidate drops the cached key if it is the rejected one.
func (k *secretKey) Invalidate(rejected string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if string(k.key) == rejected {
		k.key = ""
	}
}

// String names the secret, not its value.
func (k *secretKey) String() string { return "secretsmanager:" + k.id }

// GoString is String.
func (k *secretKey) GoString() string { return k.String() }
