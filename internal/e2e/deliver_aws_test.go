package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/destination/webhook"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// hookReceiver is a webhook receiver that verifies every request with the
// independent Standard Webhooks library (not taskledger's code), counts
// verified deliveries per webhook-id, and serves a readback.
type hookReceiver struct {
	t   *testing.T
	srv *httptest.Server
	wh  *standardwebhooks.Webhook

	mu         sync.Mutex
	deliveries map[string]int
	idemKeys   map[string]string
	badSigs    int
	lose       map[string]bool // drop the connection after recording
}

func newHookReceiver(t *testing.T, secret string) *hookReceiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{t: t, wh: wh, deliveries: map[string]int{}, idemKeys: map[string]string{}, lose: map[string]bool{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	if err := r.wh.Verify(body, req.Header); err != nil {
		r.badSigs++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	id := req.Header.Get("webhook-id")
	if req.Method == http.MethodGet {
		n := r.deliveries[strings.TrimPrefix(req.URL.Path, "/deliveries/")]
		r.mu.Unlock()
		if n == 0 {
			http.NotFound(w, req)
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"rcv-%s"}`, id)
		return
	}
	r.deliveries[id]++
	r.idemKeys[id] = req.Header.Get("Idempotency-Key")
	lose := r.lose[id]
	r.mu.Unlock()
	if lose {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	_, _ = fmt.Fprintf(w, `{"id":"rcv-%s"}`, id)
}

func (r *hookReceiver) count(id string) (deliveries, badSigs int, idemKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries[id], r.badSigs, r.idemKeys[id]
}

// A webhook deliver task end to end: the registry built from its JSON
// configuration, the signing secret read from Secrets Manager on the
// emulator, the request verified by the independent Standard Webhooks
// library; a lost reply is read back from the receiver, not re-sent.
func TestWebhookDeliverEndToEnd(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		var raw [32]byte
		_, _ = rand.Read(raw[:])
		secret := webhook.SecretPrefix + base64.StdEncoding.EncodeToString(raw[:])
		rcv := newHookReceiver(t, secret)
		sm := secretsmanager.NewFromConfig(e.AWS)
		created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(testenv.UniquePrefix() + "-crm-webhook"), SecretString: aws.String(secret)})
		if err != nil {
			t.Fatalf("CreateSecret: %v", err)
		}
		t.Cleanup(func() {
			_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: created.ARN, ForceDeleteWithoutRecovery: aws.Bool(true)})
		})
		cfg, err := deliver.ParseConfig(fmt.Sprintf(`{"webhooks":{"crm":{"url":%q,"secret_id":%q,"readback_url":%q,"not_found_credible":true}}}`,
			rcv.srv.URL+"/hooks", aws.ToString(created.ARN), rcv.srv.URL+"/deliveries/{operation_id}"))
		if err != nil {
			t.Fatal(err)
		}
		s := newDeliverStack(t, e)
		reg, err := deliver.Build(cfg, deliver.Deps{Secrets: sm, HTTPClient: rcv.srv.Client(), Now: s.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		s.reg = reg
		s.submit.Destinations, s.w.Destinations, s.rec.Destinations = reg, reg, reg

		// An endpoint that is not configured is refused at submit.
		if resp := s.call(t, http.MethodPost, "/tasks", "wh-0", `{"kind":"deliver","input":{"destination":"webhook","params":{"endpoint":"billing"},"payload":{"a":1}}}`); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("unconfigured endpoint = %d %s; want 400", resp.StatusCode, resp.Body)
		}

		id := s.submitDeliver(t, "wh-1", `{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"follow_up":"call back"}}`)
		s.work(t)
		n, bad, key := rcv.count(id)
		if got := s.task(t, id); got.State != ledger.StateCompleted || n != 1 || bad != 0 || key != id {
			t.Fatalf("webhook delivery: state %s, verified deliveries %d, bad signatures %d, Idempotency-Key %q; want completed, 1, 0, %s", got.State, n, bad, key, id)
		}
		v, _ := s.view(t, id)
		u, _ := url.Parse(rcv.srv.URL)
		if v.Receipt.Destination != webhook.Name || v.Receipt.DestinationIdentity != u.Host || v.Receipt.ProviderRef != "rcv-"+id {
			t.Fatalf("webhook receipt %+v %+v", v.Receipt, v.Receipt.DeliveryReceipt)
		}

		lost := s.submitDeliver(t, "wh-2", `{"destination":"webhook","params":{"endpoint":"crm"},"payload":{"follow_up":"write back"}}`)
		rcv.mu.Lock()
		rcv.lose[lost] = true
		rcv.mu.Unlock()
		s.work(t)
		if got := s.task(t, lost); got.State != ledger.StateUnknown {
			t.Fatalf("after the receiver dropped its reply: %s, want unknown", got.State)
		}
		if sum := s.reconcile(t); sum.ReadbackFound != 1 {
			t.Fatalf("reconciler: %+v; want the webhook read back", sum)
		}
		n, bad, _ = rcv.count(lost)
		if got := s.task(t, lost); got.State != ledger.StateCompleted || n != 1 || bad != 0 {
			t.Fatalf("after readback: %s, deliveries %d, bad signatures %d; want completed, 1, 0", got.State, n, bad)
		}
	})
}

// The AWS-native destination on both emulators: a deliver task puts one
// event on the configured bus (receipt: the bus ARN and the event id); a
// lost PutEvents reply is never re-sent (no readback, not idempotent) and
// parks the task for a person.
func TestEventBridgeDeliverEndToEnd(t *testing.T) {
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		var puts atomic.Int32
		var loseNext atomic.Bool
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Operation != "PutEvents" {
				return ""
			}
			puts.Add(1)
			if loseNext.Swap(false) {
				return faultinject.LostReply
			}
			return ""
		}))
		eb := awseb.NewFromConfig(e.AWS, func(o *awseb.Options) { o.APIOptions = append(o.APIOptions, inj.Register) })
		bus, err := eb.CreateEventBus(ctx, &awseb.CreateEventBusInput{Name: aws.String(testenv.UniquePrefix() + "-bus")})
		if err != nil {
			t.Fatalf("CreateEventBus: %v", err)
		}
		busARN := aws.ToString(bus.EventBusArn)
		t.Cleanup(func() {
			_, _ = eb.DeleteEventBus(context.Background(), &awseb.DeleteEventBusInput{Name: aws.String(busARN[strings.LastIndex(busARN, "/")+1:])})
		})
		s := newDeliverStack(t, e)
		reg, err := deliver.Build(deliver.Config{EventBridge: &deliver.EventBridgeConfig{BusARN: busARN}}, deliver.Deps{EventBridge: eb, Now: s.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		s.reg = reg
		s.submit.Destinations, s.w.Destinations, s.rec.Destinations = reg, reg, reg

		id := s.submitDeliver(t, "eb-1", `{"destination":"eventbridge","payload":{"order":"order-4711"}}`)
		s.work(t)
		v, _ := s.view(t, id)
		if v.State != string(ledger.StateCompleted) || v.Receipt.DestinationIdentity != busARN || v.Receipt.ProviderRef == "" || puts.Load() != 1 {
			t.Fatalf("eventbridge delivery: %s %+v %+v, PutEvents %d", v.State, v.Receipt, v.Receipt.DeliveryReceipt, puts.Load())
		}

		lost := s.submitDeliver(t, "eb-2", `{"destination":"eventbridge","payload":{"order":"order-4712"}}`)
		loseNext.Store(true)
		s.work(t)
		if got := s.task(t, lost); got.State != ledger.StateUnknown || got.CallStartedVersion != got.AssignmentVersion {
			t.Fatalf("after a lost PutEvents reply: %s (call started v%d of v%d); want unknown, marked", got.State, got.CallStartedVersion, got.AssignmentVersion)
		}
		s.reconcile(t)
		got := s.task(t, lost)
		if got.State != ledger.StateNeedsReview || got.ReviewReason != ledger.ReviewUnknownOutcome || puts.Load() != 2 {
			t.Fatalf("after the reconciler: %s %s, PutEvents %d; want needs_review unknown_outcome and exactly 2 puts in all", got.State, got.ReviewReason, puts.Load())
		}
	})
}
