package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Poster posts one frame to one WebSocket connection.
type Poster interface {
	// PostToConnection sends data to the connection. It returns ErrGone
	// when the connection no longer exists (API Gateway's 410).
	PostToConnection(ctx context.Context, connectionID string, data []byte) error
}

// ErrGone is a connection that no longer exists (410 GoneException).
var ErrGone = errors.New("stream: connection gone")

// ConnectionsClient is API Gateway's @connections management API
// (PostToConnection), signed with SigV4 for the execute-api service: the
// same requests in AWS (Endpoint https://{api-id}.execute-api.{region}.amazonaws.com/{stage})
// and against make run's emulation (Endpoint http://127.0.0.1:{port}).
//
// It is written on the SDK's signer rather than the SDK's
// apigatewaymanagementapi client, which the module proxy this project
// builds from does not serve; the wire format is the same
// (POST {endpoint}/@connections/{id}, the frame as the body).
type ConnectionsClient struct {
	// Endpoint is the WebSocket API's management root.
	Endpoint string
	// Region and Credentials sign the requests.
	Region      string
	Credentials aws.CredentialsProvider
	// HTTP sends them (default: a client with a 5 s timeout).
	HTTP *http.Client
}

// NewConnectionsClient returns a client for endpoint, signing with cfg's
// region and credentials.
func NewConnectionsClient(cfg aws.Config, endpoint string) *ConnectionsClient {
	return &ConnectionsClient{Endpoint: strings.TrimRight(endpoint, "/"), Region: cfg.Region, Credentials: cfg.Credentials}
}

// PostToConnection implements Poster.
func (c *ConnectionsClient) PostToConnection(ctx context.Context, connectionID string, data []byte) error {
	u := c.Endpoint + "/@connections/" + url.PathEscape(connectionID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("stream: post to connection: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Credentials != nil {
		creds, err := c.Credentials.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("stream: post to connection: credentials: %w", err)
		}
		sum := sha256.Sum256(data)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", c.Region, time.Now()); err != nil {
			return fmt.Errorf("stream: post to connection: sign: %w", err)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("stream: post to connection: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusGone:
		return ErrGone
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("stream: post to connection: status %d", resp.StatusCode)
	}
	return nil
}

var defaultHTTP = &http.Client{Timeout: 5 * time.Second}
