package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// SecretPrefix starts every Standard Webhooks signing secret.
const SecretPrefix = "whsec_"

// DefaultSecretTTL is how long SecretsManager caches a secret.
const DefaultSecretTTL = 15 * time.Minute

// SecretSource supplies an endpoint's signing secret ("whsec_<base64>").
type SecretSource interface {
	// Secret returns the signing key (the base64-decoded part of the
	// secret) for the secret id (an ARN or a name). Errors are steered with
	// pkg/retrypolicy (Misconfigured: absent, unreadable or malformed;
	// Retryable: reading it failed transiently) and never contain the
	// secret.
	Secret(ctx context.Context, id string) ([]byte, error)
}

// Invalidator is implemented by caching sources: the destination calls
// Invalidate when an endpoint rejects a signature (401/403), so a rotated
// secret is read again without a restart.
type Invalidator interface {
	Invalidate(id string)
}

// SecretValueGetter is the part of the Secrets Manager client
// SecretsManager uses; *secretsmanager.Client implements it.
type SecretValueGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretsManager returns a SecretSource reading secrets from Secrets
// Manager and caching each for ttl (DefaultSecretTTL if 0). The secret
// string is the Standard Webhooks secret itself, "whsec_" followed by the
// base64 of 24 to 64 random bytes. now is time.Now if nil.
func SecretsManager(client SecretValueGetter, ttl time.Duration, now func() time.Time) *SecretsManagerSource {
	if ttl <= 0 {
		ttl = DefaultSecretTTL
	}
	if now == nil {
		now = time.Now
	}
	return &SecretsManagerSource{client: client, ttl: ttl, now: now, cache: map[string]cached{}}
}

// SecretsManagerSource is the Secrets Manager SecretSource. It is safe for
// concurrent use.
type SecretsManagerSource struct {
	client SecretValueGetter
	ttl    time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cached
	reads int
}

type cached struct {
	key     []byte
	fetched time.Time
}

// secretConfigCodes are Secrets Manager errors a retry cannot fix.
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

// Secret returns the cached key, reading the secret when it is absent or
// older than the TTL.
func (s *SecretsManagerSource) Secret(ctx context.Context, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[id]; ok && s.now().Sub(c.fetched) < s.ttl {
		return c.key, nil
	}
	s.reads++
	out, err := s.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &id})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && secretConfigCodes[ae.ErrorCode()] {
			return nil, retrypolicy.Misconfigured(fmt.Errorf("webhook: read signing secret %s: %w", id, err))
		}
		return nil, retrypolicy.Retryable(fmt.Errorf("webhook: read signing secret %s: %w: %w", id, retrypolicy.ErrRequestNotSent, err))
	}
	if out.SecretString == nil {
		return nil, retrypolicy.Misconfigured(fmt.Errorf("webhook: signing secret %s has no SecretString", id))
	}
	key, err := ParseSecret(*out.SecretString)
	if err != nil {
		return nil, retrypolicy.Misconfigured(fmt.Errorf("webhook: signing secret %s: %w", id, err))
	}
	s.cache[id] = cached{key: key, fetched: s.now()}
	return key, nil
}

// Invalidate drops the cached secret id.
func (s *SecretsManagerSource) Invalidate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cache, id)
}

// Reads returns how many times Secrets Manager was called (for tests).
func (s *SecretsManagerSource) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// ParseSecret checks a Standard Webhooks secret ("whsec_" + base64 of 24 to
// 64 bytes) and returns its key. Errors describe the shape, never the value.
func ParseSecret(secret string) ([]byte, error) {
	secret = strings.TrimSpace(secret)
	if !strings.HasPrefix(secret, SecretPrefix) {
		return nil, fmt.Errorf("secret does not start with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return nil, errors.New("secret after the prefix is not standard base64")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("secret key is %d bytes; want 24 to 64", len(key))
	}
	return key, nil
}
