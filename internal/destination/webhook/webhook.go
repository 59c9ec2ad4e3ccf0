package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Name is the destination's name.
const Name = "webhook"

// EventType is the "type" of every delivery body.
const EventType = "taskledger.delivery"

// OperationIDPlaceholder is replaced, path-escaped, by the operation id in
// an endpoint's ReadbackURL.
const OperationIDPlaceholder = "{operation_id}"

// DefaultTimeout bounds one call when an endpoint sets none.
const DefaultTimeout = 10 * time.Second

// maxResponseBytes bounds how much of a response body is read.
const maxResponseBytes = 64 << 10

// Endpoint is one configured receiver. Requests name it; they never carry a
// URL.
type Endpoint struct {
	// URL is where deliveries are POSTed: https, a host, no user info.
	URL string
	// SecretID is the Secrets Manager secret (ARN or name) holding the
	// endpoint's "whsec_..." signing secret.
	SecretID string
	// ReadbackURL, when set, is an https URL template containing
	// {operation_id}; a GET on it answers 200 when the receiver has the
	// delivery and 404 when it does not.
	ReadbackURL string
	// NotFoundCredible: the receiver's readback is immediately consistent,
	// so its 404 proves the delivery never arrived.
	NotFoundCredible bool
	// Idempotent: the receiver is known to deduplicate by webhook-id /
	// Idempotency-Key. Leave false unless its operators promise it.
	Idempotent bool
	// Timeout bounds one call; DefaultTimeout if 0.
	Timeout time.Duration
}

// Options configure a Webhook.
type Options struct {
	// Endpoints maps endpoint names (destination-name syntax) to receivers.
	Endpoints map[string]Endpoint
	// Secrets supplies signing secrets; required.
	Secrets SecretSource
	// HTTPClient sends the requests; a client with no redirects and the
	// default transport if nil. Its redirect policy is replaced: a webhook
	// is never re-POSTed elsewhere.
	HTTPClient *http.Client
	// Now stamps webhook-timestamp and readbacks; time.Now if nil.
	Now func() time.Time
}

// Webhook is the webhook destination. It is safe for concurrent use.
type Webhook struct {
	endpoints map[string]endpoint
	secrets   SecretSource
	client    *http.Client
	now       func() time.Time
}

type endpoint struct {
	Endpoint
	name string
	host string
}

// New validates the configuration and returns the destination. Errors are
// retrypolicy.Misconfigured and name the endpoint and the rule.
func New(opts Options) (*Webhook, error) {
	if opts.Secrets == nil {
		return nil, misconfigured("no secret source configured")
	}
	if len(opts.Endpoints) == 0 {
		return nil, misconfigured("no endpoints configured")
	}
	w := &Webhook{endpoints: map[string]endpoint{}, secrets: opts.Secrets, now: opts.Now}
	if w.now == nil {
		w.now = time.Now
	}
	var errs []error
	for name, ep := range opts.Endpoints {
		e, err := checkEndpoint(name, ep)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w.endpoints[name] = e
	}
	if len(errs) > 0 {
		return nil, retrypolicy.Misconfigured(errors.Join(errs...))
	}
	c := http.Client{}
	if opts.HTTPClient != nil {
		c = *opts.HTTPClient
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w.client = &c
	return w, nil
}

func misconfigured(format string, args ...any) error {
	return retrypolicy.Misconfigured(fmt.Errorf("webhook: "+format, args...))
}

func checkEndpoint(name string, ep Endpoint) (endpoint, error) {
	if !destination.ValidName(name) {
		return endpoint{}, fmt.Errorf("webhook: endpoint name %q: lowercase letters, digits, '_' or '-', starting with a letter", clipped(name))
	}
	u, err := httpsURL(ep.URL)
	if err != nil {
		return endpoint{}, fmt.Errorf("webhook: endpoint %s: URL %w", name, err)
	}
	if strings.TrimSpace(ep.SecretID) == "" {
		return endpoint{}, fmt.Errorf("webhook: endpoint %s: no signing secret configured", name)
	}
	if ep.ReadbackURL != "" {
		if !strings.Contains(ep.ReadbackURL, OperationIDPlaceholder) {
			return endpoint{}, fmt.Errorf("webhook: endpoint %s: readback URL has no %s", name, OperationIDPlaceholder)
		}
		if _, err := httpsURL(strings.ReplaceAll(ep.ReadbackURL, OperationIDPlaceholder, "x")); err != nil {
			return endpoint{}, fmt.Errorf("webhook: endpoint %s: readback URL %w", name, err)
		}
	}
	if ep.Timeout < 0 {
		return endpoint{}, fmt.Errorf("webhook: endpoint %s: negative timeout", name)
	}
	if ep.Timeout == 0 {
		ep.Timeout = DefaultTimeout
	}
	return endpoint{Endpoint: ep, name: name, host: u.Host}, nil
}

func httpsURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("does not parse")
	case u.Scheme != "https":
		return nil, errors.New("must be https")
	case u.Host == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry user info (put credentials in the secret)")
	}
	return u, nil
}

func clipped(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}

// Name returns "webhook".
func (w *Webhook) Name() string { return Name }

// Guarantees are the promises made without knowing the endpoint: none.
// GuaranteesFor gives an endpoint's.
func (w *Webhook) Guarantees() destination.Guarantees { return destination.Guarantees{} }

// Params are the webhook destination's params.
type Params struct {
	// Endpoint names a configured endpoint.
	Endpoint string `json:"endpoint"`
}

func (w *Webhook) endpointOf(params json.RawMessage) (endpoint, error) {
	var p Params
	if err := destination.ParseParams(Name, params, &p); err != nil {
		return endpoint{}, err
	}
	if p.Endpoint == "" {
		return endpoint{}, retrypolicy.Permanent(&destination.ParamsError{Destination: Name, Field: "endpoint", Problem: "is required"})
	}
	ep, ok := w.endpoints[p.Endpoint]
	if !ok {
		names := make([]string, 0, len(w.endpoints))
		for n := range w.endpoints {
			names = append(names, n)
		}
		slices.Sort(names)
		return endpoint{}, retrypolicy.Permanent(&destination.ParamsError{Destination: Name, Field: "endpoint",
			Problem: fmt.Sprintf("no endpoint %q is configured (configured: %s)", clipped(p.Endpoint), strings.Join(names, ", "))})
	}
	return ep, nil
}

// GuaranteesFor returns the guarantees of the endpoint params names:
// readback by operation id when it has a ReadbackURL, its NotFoundCredible
// and Idempotent settings.
func (w *Webhook) GuaranteesFor(params json.RawMessage) (destination.Guarantees, error) {
	ep, err := w.endpointOf(params)
	if err != nil {
		return destination.Guarantees{}, err
	}
	g := destination.Guarantees{Idempotent: ep.Idempotent, Readback: destination.ReadbackNone}
	if ep.ReadbackURL != "" {
		g.Readback = destination.ReadbackByOperationID
		g.NotFoundCredible = ep.NotFoundCredible
	}
	return g, nil
}

// Body is the JSON body of a delivery, in the Standard Webhooks shape.
type Body struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      BodyData  `json:"data"`
}

// BodyData is Body.Data.
type BodyData struct {
	OperationID   string `json:"operation_id"`
	PayloadSHA256 string `json:"payload_sha256"`
	CorrelationID string `json:"correlation_id,omitempty"`
	// Provenance says where the delivery came from (an approval, or a
	// direct submit): inside the signed body, so a receiver can trust it.
	Provenance *destination.Provenance `json:"provenance,omitempty"`
	Payload    json.RawMessage         `json:"payload"`
}

// encodeBody encodes a Body with the payload's exact bytes (json.Marshal
// would compact them), so payload_sha256 is the hash of the bytes the
// receiver gets.
func encodeBody(now time.Time, d BodyData) ([]byte, error) {
	payload := d.Payload
	d.Payload = json.RawMessage(`null`)
	b, err := json.Marshal(Body{Type: EventType, Timestamp: now.UTC().Truncate(time.Second), Data: d})
	if err != nil {
		return nil, err
	}
	const tail = `"payload":null}}`
	if !bytes.HasSuffix(b, []byte(tail)) {
		return nil, errors.New("unexpected body encoding")
	}
	out := make([]byte, 0, len(b)+len(payload))
	out = append(out, b[:len(b)-len(`null}}`)]...)
	out = append(out, payload...)
	return append(out, `}}`...), nil
}

// Sign returns the Standard Webhooks signature header value
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>".
func Sign(key []byte, id string, timestamp time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Deliver POSTs the payload to the endpoint params names, signed with its
// secret, with webhook-id and Idempotency-Key set to the operation id.
//
//	2xx                         receipt (provider_ref: the body's "id", else X-Request-Id)
//	504, 524                    Uncertain: a gateway gave up waiting on a
//	                            receiver that may have acted (the readback
//	                            decides), as the providers' adapters do
//	408, 429, 503               Throttled (Retry-After honoured): the
//	                            receiver did not handle the request
//	other 5xx (500, 502, ...)   Uncertain: the receiver (or the backend
//	                            behind its load balancer) may have acted
//	                            and then failed, so the POST is never
//	                            re-sent blind (the readback decides)
//	401, 403                    Misconfigured (the cached secret is dropped)
//	302, 303                    Uncertain: the redirect a receiver that
//	                            processed a POST answers with (Rails,
//	                            Express, Django, Flask): the readback decides
//	409                         Uncertain: a request with the same
//	                            Idempotency-Key is (or was) being processed
//	other 3xx, 404, 410         Misconfigured (the endpoint moved or is gone)
//	other 4xx                   Permanent
//	failure before the request  Retryable (retrypolicy.ErrRequestNotSent)
//	was fully written
//	failure after it was        Uncertain: the receiver may have acted
//	written (timeout, reset)
//
// The request is never replayed by the HTTP client: it carries no GetBody,
// so Go's transport cannot re-send it on a reused connection.
func (w *Webhook) Deliver(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	ep, err := w.endpointOf(req.Params)
	if err != nil {
		return destination.Receipt{}, err
	}
	key, err := w.secrets.Secret(ctx, ep.SecretID)
	if err != nil {
		return destination.Receipt{}, err
	}
	now := w.now()
	body, err := encodeBody(now, BodyData{OperationID: req.OperationID, PayloadSHA256: sum, CorrelationID: req.CorrelationID, Provenance: req.Provenance, Payload: req.Payload})
	if err != nil {
		return destination.Receipt{}, retrypolicy.Permanent(fmt.Errorf("webhook: operation %s: encode body: %w", req.OperationID, err))
	}
	ctx, cancel := context.WithTimeout(ctx, ep.Timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return destination.Receipt{}, retrypolicy.Misconfigured(fmt.Errorf("webhook: endpoint %s: build request: %w", ep.name, err))
	}
	hr.GetBody = nil // never replayable: see the method doc
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("User-Agent", "taskledger-webhook/1")
	hr.Header.Set("webhook-id", req.OperationID)
	hr.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	hr.Header.Set("webhook-signature", Sign(key, req.OperationID, now, body))
	hr.Header.Set("Idempotency-Key", req.OperationID)
	if req.CorrelationID != "" {
		hr.Header.Set("X-Correlation-Id", req.CorrelationID)
	}
	resp, err := w.client.Do(hr)
	if err != nil {
		if !wrote.Load() {
			return destination.Receipt{}, retrypolicy.Retryable(fmt.Errorf("webhook: endpoint %s: operation %s: %w: %w", ep.name, req.OperationID, retrypolicy.ErrRequestNotSent, err))
		}
		return destination.Receipt{}, retrypolicy.Uncertain(fmt.Errorf("webhook: endpoint %s: operation %s: the request was sent, the reply was lost: %w", ep.name, req.OperationID, err))
	}
	defer resp.Body.Close()
	respBody, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return destination.Receipt{}, w.statusErr(ep, req.OperationID, resp, true)
	}
	_ = readErr // the status decided; a body cut short only loses the reference
	return destination.Receipt{
		OperationID:         req.OperationID,
		PayloadSHA256:       sum,
		Destination:         Name,
		DestinationIdentity: ep.host,
		ProviderRef:         refOf(resp, respBody),
	}, nil
}

// statusErr steers a non-2xx answer. delivery: the answer is to the
// delivery's POST, where a 5xx other than 503 means the receiver may have
// acted before failing (a handler's unhandled exception after its commit, a
// load balancer's 502 for a backend that died after it): Uncertain, never a
// blind re-send. A readback GET is safe to repeat, so there those 5xx
// stay Throttled.
func (w *Webhook) statusErr(ep endpoint, opID string, resp *http.Response, delivery bool) error {
	se := &retrypolicy.StatusError{StatusCode: resp.StatusCode, RetryAfter: retrypolicy.ParseRetryAfter(resp.Header.Get("Retry-After"), w.now())}
	err := fmt.Errorf("webhook: endpoint %s: operation %s: %w", ep.name, opID, se)
	switch code := resp.StatusCode; {
	case code == http.StatusFound, code == http.StatusSeeOther, code == http.StatusConflict,
		code == http.StatusGatewayTimeout, code == 524:
		return retrypolicy.Uncertain(err)
	case code == 408, code == 429, code == http.StatusServiceUnavailable:
		return retrypolicy.Throttled(err, se.RetryAfter)
	case code >= 500 && delivery:
		return retrypolicy.Uncertain(err)
	case code >= 500:
		return retrypolicy.Throttled(err, se.RetryAfter)
	case code == 401, code == 403:
		if inv, ok := w.secrets.(Invalidator); ok {
			inv.Invalidate(ep.SecretID)
		}
		return retrypolicy.Misconfigured(err)
	case code < 400, code == 404, code == 410:
		return retrypolicy.Misconfigured(err)
	}
	return retrypolicy.Permanent(err)
}

// refOf finds the receiver's id for a delivery: the "id" string of a JSON
// object body, else the X-Request-Id header.
func refOf(resp *http.Response, body []byte) string {
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &obj) == nil && obj.ID != "" {
		return clipped(obj.ID)
	}
	return clipped(resp.Header.Get("X-Request-Id"))
}

// Lookup GETs the endpoint's ReadbackURL for the operation id, signed like
// a delivery with an empty body. 200 → the receipt with ReadbackResult
// "found"; 404 → destination.ErrNotFound; no ReadbackURL →
// destination.ErrNoReadback; anything else → an error steered like
// Deliver's (a failed GET is always safe to repeat, so never Uncertain).
func (w *Webhook) Lookup(ctx context.Context, req destination.Request) (destination.Receipt, error) {
	sum, err := req.Validate()
	if err != nil {
		return destination.Receipt{}, err
	}
	ep, err := w.endpointOf(req.Params)
	if err != nil {
		return destination.Receipt{}, err
	}
	if ep.ReadbackURL == "" {
		return destination.Receipt{}, destination.ErrNoReadback
	}
	key, err := w.secrets.Secret(ctx, ep.SecretID)
	if err != nil {
		return destination.Receipt{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, ep.Timeout)
	defer cancel()
	u := strings.ReplaceAll(ep.ReadbackURL, OperationIDPlaceholder, url.PathEscape(req.OperationID))
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return destination.Receipt{}, retrypolicy.Misconfigured(fmt.Errorf("webhook: endpoint %s: build readback: %w", ep.name, err))
	}
	now := w.now()
	hr.Header.Set("User-Agent", "taskledger-webhook/1")
	hr.Header.Set("webhook-id", req.OperationID)
	hr.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	hr.Header.Set("webhook-signature", Sign(key, req.OperationID, now, nil))
	resp, err := w.client.Do(hr)
	if err != nil {
		return destination.Receipt{}, retrypolicy.Retryable(fmt.Errorf("webhook: endpoint %s: readback of %s: %w", ep.name, req.OperationID, err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	switch {
	case resp.StatusCode == http.StatusOK:
		return destination.Receipt{
			OperationID:         req.OperationID,
			PayloadSHA256:       sum,
			Destination:         Name,
			DestinationIdentity: ep.host,
			ProviderRef:         refOf(resp, body),
			ReadbackAt:          now.UTC(),
			ReadbackResult:      destination.ReadbackFound,
		}, nil
	case resp.StatusCode == http.StatusNotFound:
		return destination.Receipt{}, fmt.Errorf("webhook: endpoint %s: readback of %s: %w", ep.name, req.OperationID, destination.ErrNotFound)
	}
	err = w.statusErr(ep, req.OperationID, resp, false)
	if c := retrypolicy.Classify(err).Class; c == retrypolicy.PermanentInput {
		// A readback the receiver refuses is a configuration problem, not
		// the delivery's.
		return destination.Receipt{}, retrypolicy.Misconfigured(err)
	}
	return destination.Receipt{}, err
}
