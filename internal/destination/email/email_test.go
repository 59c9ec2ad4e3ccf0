package email_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/destination/email"
	"github.com/taskledger/taskledger/internal/destination/internal/emutest"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/testenv"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

func TestMain(m *testing.M) { emutest.Main(m) }

const payload = `{"text":"Your order 4711 ships on Monday.","model":"sim"}`

func class(err error) retrypolicy.Class { return retrypolicy.Classify(err).Class }

func req(opID, params string) destination.Request {
	return destination.Request{OperationID: opID, Attempt: 1, Destination: email.Name, Params: json.RawMessage(params),
		Payload: json.RawMessage(payload), Provenance: &destination.Provenance{Type: destination.ProvenanceDirect, Caller: "jwt:alice"}}
}

// sent is one message as an emulator recorded it.
type sent struct {
	ID      string
	From    string
	To      []string
	Subject string
	Body    string
}

// sentMessages reads what the emulator recorded as sent: kumo's
// /kumo/ses/v2/sent-emails, moto's /moto-api/data.json (ses.Message).
func sentMessages(t *testing.T, be emutest.Backend) []sent {
	t.Helper()
	get := func(path string, v any) {
		resp, err := http.Get(be.Endpoint + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var out []sent
	switch be.Name {
	case "kumo":
		var r struct {
			SentEmails []struct {
				MessageID        string `json:"MessageId"`
				FromEmailAddress string
				Destination      struct{ ToAddresses []string }
				Subject, Body    string
			}
		}
		get("/kumo/ses/v2/sent-emails", &r)
		for _, m := range r.SentEmails {
			out = append(out, sent{m.MessageID, m.FromEmailAddress, m.Destination.ToAddresses, m.Subject, m.Body})
		}
	case "moto":
		var r struct {
			SES struct {
				Message []struct {
					ID           string `json:"id"`
					Source       string `json:"source"`
					Subject      string `json:"subject"`
					Body         string `json:"body"`
					Destinations struct {
						ToAddresses []string
					} `json:"destinations"`
				}
			} `json:"ses"`
		}
		get("/moto-api/data.json", &r)
		for _, m := range r.SES.Message {
			out = append(out, sent{m.ID, m.Source, m.Destinations.ToAddresses, m.Subject, m.Body})
		}
	default:
		t.Skipf("no way to read sent messages on %s", be.Name)
	}
	return out
}

func withSubject(msgs []sent, subject string) []sent {
	var out []sent
	for _, m := range msgs {
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

type bundle struct {
	dest *email.Destination
	next atomic.Value // faultinject.Kind for the next SendEmail
	ses  *sesv2.Client
}

// setup verifies the sender's domain on the emulator (moto refuses an
// unverified sender, as SES does; kumo accepts any) and returns the
// destination with a fault injector around the real client. With no
// domain it returns only the client.
func setup(t *testing.T, be emutest.Backend, domain string) *bundle {
	t.Helper()
	b := &bundle{}
	b.next.Store(faultinject.Kind(""))
	inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
		if c.Operation != "SendEmail" {
			return ""
		}
		return b.next.Swap(faultinject.Kind("")).(faultinject.Kind)
	}))
	b.ses = sesv2.NewFromConfig(be.AWS, func(o *sesv2.Options) { o.APIOptions = append(o.APIOptions, inj.Register) })
	if domain == "" {
		return b
	}
	if _, err := b.ses.CreateEmailIdentity(context.Background(), &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(domain)}); err != nil {
		t.Fatalf("CreateEmailIdentity: %v", err)
	}
	d, err := email.New(email.Options{From: "Orders <noreply@" + domain + ">", AllowedRecipients: []string{"ops@example.com", "@team.example.org"}, Client: b.ses})
	if err != nil {
		t.Fatal(err)
	}
	b.dest = d
	return b
}

func TestSendEmailDeliversOneMessageToAllowedRecipients(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		domain := strings.ToLower(testenv.UniquePrefix()) + ".example.net"
		b := setup(t, be, domain)
		subject := "order " + domain
		rc, err := b.dest.Deliver(context.Background(), req("t_mail1", `{"to":["Ops@Example.com","Dana@team.example.org"],"subject":"`+subject+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if rc.Destination != "email" || rc.DestinationIdentity != "noreply@"+domain || rc.ProviderRef == "" || rc.OperationID != "t_mail1" ||
			rc.PayloadSHA256 != destination.HashPayload(json.RawMessage(payload)) {
			t.Fatalf("receipt = %+v", rc)
		}
		msgs := withSubject(sentMessages(t, be), subject)
		if len(msgs) != 1 {
			t.Fatalf("%d messages with the subject, want 1: %+v", len(msgs), msgs)
		}
		m := msgs[0]
		if m.ID != rc.ProviderRef {
			t.Errorf("message id %s, receipt names %s", m.ID, rc.ProviderRef)
		}
		if strings.Join(m.To, ",") != "ops@example.com,dana@team.example.org" {
			t.Errorf("to = %v", m.To)
		}
		if !strings.Contains(m.From, "noreply@"+domain) {
			t.Errorf("from = %q", m.From)
		}
		for _, want := range []string{"Your order 4711 ships on Monday.", "operation t_mail1", "payload sha256 " + rc.PayloadSHA256, `"type":"direct"`} {
			if !strings.Contains(m.Body, want) {
				t.Errorf("body %q lacks %q", m.Body, want)
			}
		}
	})
}

func TestLostSendReplyIsUncertainAndNeverResent(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		domain := strings.ToLower(testenv.UniquePrefix()) + ".example.net"
		b := setup(t, be, domain)
		subject := "lost " + domain
		b.next.Store(faultinject.LostReply)
		_, err := b.dest.Deliver(context.Background(), req("t_mail2", `{"to":["ops@example.com"],"subject":"`+subject+`"}`))
		if class(err) != retrypolicy.UnknownOutcome {
			t.Fatalf("class = %v (%v), want unknown", class(err), err)
		}
		// SES accepted it once; nothing (not the SDK) sent it again.
		if n := len(withSubject(sentMessages(t, be), subject)); n != 1 {
			t.Fatalf("%d messages sent, want exactly 1", n)
		}
		// No readback: the rule parks it for a person.
		g := b.dest.Guarantees()
		if d := destination.Decide(destination.Situation{Guarantees: g, Class: retrypolicy.UnknownOutcome}); d.Action != destination.Park {
			t.Fatalf("decision = %+v, want park", d)
		}
	})
}

func TestUnverifiedSenderIsMisconfigured(t *testing.T) {
	emutest.Each(t, func(t *testing.T, be emutest.Backend) {
		if be.Name == "kumo" {
			t.Skip("kumo's SES v2 accepts any sender (identities are auto-verified); moto refuses an unverified one as SES does")
		}
		b := setup(t, be, "")
		d, err := email.New(email.Options{From: "noreply@unverified-" + strings.ToLower(testenv.UniquePrefix()) + ".example.net", AllowedRecipients: []string{"ops@example.com"}, Client: b.ses})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Deliver(context.Background(), req("t_mail3", `{"to":["ops@example.com"]}`))
		if class(err) != retrypolicy.PermanentConfig {
			t.Fatalf("class = %v (%v), want misconfigured", class(err), err)
		}
	})
}

// fakeSES records calls and answers with err.
type fakeSES struct {
	calls atomic.Int32
	err   error
}

func (f *fakeSES) SendEmail(context.Context, *sesv2.SendEmailInput, ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return &sesv2.SendEmailOutput{MessageId: aws.String("m-1")}, nil
}

func TestRecipientsOutsideTheAllowListAreRefusedBeforeAnySend(t *testing.T) {
	t.Parallel()
	f := &fakeSES{}
	d, err := email.New(email.Options{From: "noreply@example.com", AllowedRecipients: []string{"ops@example.com", "@team.example.org"}, Client: f})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		`{}`:                          "to: is required",
		`{"to":[]}`:                   "to: is required",
		`{"to":["eve@evil.example"]}`: "to[0]: eve@evil.example is not an allowed recipient",
		`{"to":["ops@example.com","x@example.com"]}`:                      "to[1]: x@example.com is not an allowed recipient",
		`{"to":["dana@sub.team.example.org"]}`:                            "to[0]: dana@sub.team.example.org is not an allowed recipient",
		`{"to":["Ops <ops@example.com>"]}`:                                "to[0]: is not a plain email address",
		`{"to":"ops@example.com"}`:                                        "must be of type",
		`{"to":["ops@example.com"],"from":"ceo@example.com"}`:             "unknown field",
		`{"to":["ops@example.com"],"subject":"a\nBcc: eve@evil.example"}`: "subject: must be one line",
	}
	for params, want := range cases {
		err := d.CheckParams(json.RawMessage(params))
		var pe *destination.ParamsError
		if !errors.As(err, &pe) || class(err) != retrypolicy.PermanentInput || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckParams(%s) = %v, want a permanent ParamsError saying %q", params, err, want)
		}
		if _, err := d.Deliver(context.Background(), req("t_1", params)); class(err) != retrypolicy.PermanentInput {
			t.Errorf("Deliver(%s) = %v, want refused", params, err)
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("%d sends for refused params, want 0", n)
	}
	for _, ok := range []string{`{"to":["OPS@example.com"]}`, `{"to":["dana@team.example.org"],"subject":"Hello"}`} {
		if err := d.CheckParams(json.RawMessage(ok)); err != nil {
			t.Errorf("CheckParams(%s) = %v, want accepted", ok, err)
		}
	}
}

func TestSendErrorsAreSteered(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]retrypolicy.Class{
		"TooManyRequestsException":           retrypolicy.Transient,
		"LimitExceededException":             retrypolicy.Transient,
		"MessageRejected":                    retrypolicy.PermanentConfig,
		"MailFromDomainNotVerifiedException": retrypolicy.PermanentConfig,
		"AccountSuspendedException":          retrypolicy.PermanentConfig,
		"SendingPausedException":             retrypolicy.PermanentConfig,
		"BadRequestException":                retrypolicy.PermanentInput,
		"InternalServiceErrorException":      retrypolicy.UnknownOutcome,
	} {
		fault := smithy.FaultClient
		if code == "InternalServiceErrorException" {
			fault = smithy.FaultServer
		}
		f := &fakeSES{err: &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault}}
		d, err := email.New(email.Options{From: "noreply@example.com", AllowedRecipients: []string{"ops@example.com"}, Client: f})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Deliver(context.Background(), req("t_1", `{"to":["ops@example.com"]}`))
		if got := class(err); got != want {
			t.Errorf("%s: class %v (%v), want %v", code, got, err, want)
		}
	}
	// A send that never left the process is safe to retry.
	f := &fakeSES{err: context.DeadlineExceeded}
	d, _ := email.New(email.Options{From: "noreply@example.com", AllowedRecipients: []string{"ops@example.com"}, Client: f})
	if _, err := d.Deliver(context.Background(), req("t_1", `{"to":["ops@example.com"]}`)); class(err) != retrypolicy.UnknownOutcome {
		t.Errorf("a timeout: %v, want unknown", err)
	}
}

func TestNewNeedsASenderAndAnAllowList(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]email.Options{
		"no sender":          {AllowedRecipients: []string{"ops@example.com"}, Client: &fakeSES{}},
		"no allow-list":      {From: "noreply@example.com", Client: &fakeSES{}},
		"a bad allowed item": {From: "noreply@example.com", AllowedRecipients: []string{"example.com"}, Client: &fakeSES{}},
		"no client":          {From: "noreply@example.com", AllowedRecipients: []string{"ops@example.com"}},
	} {
		if _, err := email.New(o); class(err) != retrypolicy.PermanentConfig {
			t.Errorf("%s: %v, want misconfigured", name, err)
		}
	}

}
