// Command taskledger-local runs the whole taskledger stack on this machine
// (`make run`): the embedded AWS emulator, the tables and queues of
// template.yaml, the three handlers behind emulated event sources, the
// simulated provider and the browser page. See package internal/local.
//
// Environment:
//
//	ADDR                 HTTP listen address (default 127.0.0.1:3000; loopback only)
//	STREAM_ADDR          the emulated WebSocket API of streamed replies (default 127.0.0.1:3001;
//	                     loopback only; advertised as stream_url in GET /auth/config)
//	PROVIDER_SIMULATED_STREAM_MS  the simulated provider's pause before each streamed chunk
//	                     (default 0; e.g. 80 to watch a reply grow)
//	AWS_ENDPOINT_URL     use this AWS endpoint (LocalStack, moto_server) instead of the embedded emulator
//	PROVIDER, PROVIDER_* the provider (default simulated; see internal/provider)
//	PROVIDER_FAULTS      simulated faults for demos, e.g. "throttle=0.2,accept_lose_reply=0.1"
//	PROVIDER_ADMISSION   provider admission limits (JSON, as deployed; default none): the worker
//	                     admits its calls by them, the task API refuses a task over them (422)
//	SPEND_CONFIG         prices and daily quota (default: the template's SpendConfig)
//	SPEND_DAILY_QUOTA_TOKENS  per-caller daily token quota, as deployed (default none; 0 none)
//	LOG_LEVEL            level of the handlers' JSON logs on stderr (default warn)
//	ALLOWED_ORIGINS      CORS allow-list of the task API (default none: the page is same-origin)
//	LEASE_SECONDS        the worker's lease (default 30)
//	RECONCILE_EVERY      the reconciler's period (default: the template's schedule), e.g. 10s
//	TASKLEDGER_PREFIX    resource name prefix (default taskledger-local)
//	TASKLEDGER_EXAMPLE_DESTINATION  "off" to not start the example lambda destination
//	                     (functions/exampledestination under aws-lambda-rie, registered as the
//	                     lambda destination's function "example"; default on when RIE can be built)
//
// Sign-in (default: none — no authorizer, every caller is anonymous):
//
//	TASKLEDGER_OIDC_ISSUER     an OpenID Connect issuer URL: /tasks… then require a bearer JWT
//	                           of that issuer, checked like API Gateway's JWT authorizer
//	TASKLEDGER_OIDC_AUDIENCE   the authorizer's audience, comma-separated (the app client id)
//	TASKLEDGER_OIDC_CLIENT_ID  the client id the page signs in with (default: the first audience)
//	TASKLEDGER_OIDC_SCOPES     scopes the page asks for (default "openid email profile")
//
// Approvals (as deployed; see api.ApprovalPolicy):
//
//	APPROVER_CLAIM        the JWT claim naming approvers, e.g. groups (needs TASKLEDGER_OIDC_ISSUER;
//	                      default none: a task's owner decides)
//	APPROVER_CLAIM_VALUE  the group (or value) the claim must hold (default "true")
//	ALLOW_SELF_APPROVAL   whether an approver decides on their own task (default true)
//	DIRECT_DELIVER        who may submit a deliver task directly: ApproversOnly (default;
//	                      every caller without APPROVER_CLAIM), Anyone or Disabled
//
// It stops cleanly on Ctrl-C or SIGTERM; a second signal exits at once.
package main

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/local"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/pkg/ledger"
)

// DefaultStreamAddr is make run's WebSocket API address when STREAM_ADDR is
// unset: beside the page's default port.
const DefaultStreamAddr = "127.0.0.1:3001"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "taskledger-local:", err)
		os.Exit(1)
	}
}

func run() error {
	o, err := options()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("taskledger-local: starting…")
	var example *local.ExampleDestination
	if v := strings.ToLower(strings.TrimSpace(os.Getenv("TASKLEDGER_EXAMPLE_DESTINATION"))); v != "off" && v != "0" && v != "false" {
		example, err = local.StartExampleDestination(ctx, func(line string) { fmt.Println("taskledger-local: " + line) })
		if err != nil {
			// A convenience, not a requirement: the stack runs without it.
			fmt.Printf("taskledger-local: example lambda destination not started: %v\n", err)
			example = nil
		} else {
			defer example.Stop()
			example.Register(&o.Destinations)
			o.LambdaEndpoint = example.URL
		}
	}
	st, err := local.Start(ctx, o)
	if err != nil {
		return err
	}
	banner(st, o, example)

	<-ctx.Done()
	stop() // a second Ctrl-C now kills the process
	fmt.Println("\ntaskledger-local: stopping (in-flight work gets a few seconds to finish)…")
	if err := st.Close(); err != nil {
		return err
	}
	fmt.Println("taskledger-local: stopped")
	return nil
}

func options() (local.Options, error) {
	level := os.Getenv("LOG_LEVEL")
	if level == "" {
		level = "warn"
	}
	o := local.Options{
		Addr:           os.Getenv("ADDR"),
		StreamAddr:     cmp.Or(os.Getenv("STREAM_ADDR"), DefaultStreamAddr),
		Endpoint:       strings.TrimSpace(os.Getenv("AWS_ENDPOINT_URL")),
		Provider:       provider.ConfigFromEnv(nil),
		Progress:       os.Stdout,
		Log:            logging.New(os.Stderr, level),
		Prefix:         os.Getenv("TASKLEDGER_PREFIX"),
		AllowedOrigins: api.ParseOrigins(os.Getenv("ALLOWED_ORIGINS")),
		SpendConfig:    os.Getenv("SPEND_CONFIG"),
		Admission:      os.Getenv(admission.EnvVar),
		OIDCIssuer:     strings.TrimSpace(os.Getenv("TASKLEDGER_OIDC_ISSUER")),
		OIDCAudience:   api.ParseOrigins(os.Getenv("TASKLEDGER_OIDC_AUDIENCE")),
		OIDCClientID:   strings.TrimSpace(os.Getenv("TASKLEDGER_OIDC_CLIENT_ID")),
		OIDCScopes:     strings.TrimSpace(os.Getenv("TASKLEDGER_OIDC_SCOPES")),
	}
	// The per-caller daily token quota, as the template's
	// DailyQuotaTokensPerCaller reaches the functions (default here: none).
	o.DailyQuotaTokens = os.Getenv("SPEND_DAILY_QUOTA_TOKENS")
	if err := oidcOptions(o); err != nil {
		return o, err
	}
	// Who may submit a deliver task directly, as DIRECT_DELIVER deployed.
	dd, ddErr := api.ParseDirectDeliver(os.Getenv("DIRECT_DELIVER"))
	if ddErr != nil {
		return o, ddErr
	}
	o.DirectDeliver = dd
	if err := o.Provider.Validate(); err != nil {
		return o, err
	}
	// make run registers the simulated destinations (notify, publish,
	// crm) and the email destination — a local sender, allowed to mail
	// @example.com, sending through the emulator's SES — unless
	// TASKLEDGER_DESTINATIONS says otherwise; and, unless
	// TASKLEDGER_NOTIFICATIONS says otherwise, notifies by email the
	// approvers (approver@example.com) and the requester (signed in: the
	// token's email; without sign-in: requester@example.com).
	dests := os.Getenv(deliver.EnvVar)
	if strings.TrimSpace(dests) == "" {
		dests = `{"simulated":{},"email":{"from":"taskledger@tasks.example.com","allowed_recipients":["@example.com"]}}`
		if _, set := os.LookupEnv(followup.EnvVar); !set {
			addr := o.Addr
			if addr == "" {
				addr = local.DefaultAddr
			}
			o.Notify = `{"page_origin":"http://` + addr + `","approvers":{"email":["approver@example.com"]},"requester":{"email":true,"anonymous_email":"requester@example.com"}}`
		}
	}
	if v, set := os.LookupEnv(followup.EnvVar); set {
		o.Notify = v
	}
	var err error
	if o.Destinations, err = deliver.ParseConfig(dests); err != nil {
		return o, err
	}
	if v := os.Getenv("LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			return o, fmt.Errorf("LEASE_SECONDS=%q: want a whole number of seconds, at least 3", v)
		}
		o.Lease = time.Duration(n) * time.Second
	}
	if v := strings.TrimSpace(os.Getenv("TASK_ID_KEY")); v != "" {
		if len(v) < ledger.MinIDKeyBytes {
			return o, fmt.Errorf("TASK_ID_KEY has %d bytes: want at least %d (random; it keys the task ids)", len(v), ledger.MinIDKeyBytes)
		}
		o.TaskIDKey = ledger.SecretKey(v)
	}
	if v := os.Getenv("RECONCILE_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return o, fmt.Errorf("RECONCILE_EVERY=%q: want a duration of at least 1s, e.g. 10s", v)
		}
		o.ReconcileEvery = d
	}
	// Who decides on approvals, read as the deployed submit function reads
	// it (an approver claim needs TASKLEDGER_OIDC_ISSUER: local.Start).
	if o.Approvals, err = api.ParseApprovalPolicy(os.Getenv("APPROVER_CLAIM"), os.Getenv("APPROVER_CLAIM_VALUE"), os.Getenv("ALLOW_SELF_APPROVAL")); err != nil {
		return o, err
	}
	return o, nil
}

// oidcOptions checks the sign-in settings: an issuer needs an audience,
// and the other settings mean nothing without an issuer.
func oidcOptions(o local.Options) error {
	if o.OIDCIssuer == "" {
		if len(o.OIDCAudience) > 0 || o.OIDCClientID != "" || o.OIDCScopes != "" {
			return fmt.Errorf("TASKLEDGER_OIDC_AUDIENCE, _CLIENT_ID and _SCOPES need TASKLEDGER_OIDC_ISSUER (the issuer URL)")
		}
		return nil
	}
	u, err := url.Parse(o.OIDCIssuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("TASKLEDGER_OIDC_ISSUER=%q: want the issuer's http(s) URL, exactly as its tokens' iss claim names it", o.OIDCIssuer)
	}
	if len(o.OIDCAudience) == 0 {
		return fmt.Errorf("TASKLEDGER_OIDC_ISSUER is set but TASKLEDGER_OIDC_AUDIENCE is empty: name the app client id the tokens are issued to")
	}
	return nil
}

func banner(st *local.Stack, o local.Options, example *local.ExampleDestination) {
	emu := st.Endpoint + "  (external)"
	if st.Embedded {
		emu = st.Endpoint + "  (embedded kumo: DynamoDB + SQS, in this process)"
	}
	prov := o.Provider.String()
	if s, ok := st.Provider.(fmt.Stringer); ok {
		prov = s.String()
	}
	if o.Provider.RetrySafeGeneration() {
		prov += "; generation retry-safe (GENERATION_EFFECT_CLASS=effect to review every uncertain call)"
	} else {
		prov += "; generation is an effect (GENERATION_EFFECT_CLASS)"
	}
	p := st.Poller
	awsCLI := ""
	if st.Embedded {
		awsCLI = "AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test "
	}
	lines := []string{
		"",
		"taskledger local stack is up",
		"  page        " + st.URL + "/",
		"  sign-in     " + authLine(st.Auth),
		"  task API    " + st.URL + "/tasks      operator API " + st.URL + "/reviews",
		"  stream      " + st.StreamURL + " (WebSocket: streamed replies, docs/streaming.md)",
		"  emulator    " + emu,
		"  tables      " + st.Names.TasksTable + ", " + st.Names.ReviewTable + ", " + st.Names.WatchTable + " (watch)",
		"  queues      " + queueName(st.Names.TaskQueueURL) + ", " + queueName(st.Names.DeadLetterQueueURL) + " (dead letters)",
		"  provider    " + prov,
		fmt.Sprintf("  worker      batches of up to %d, window %s, %d at a time, timeout %s, partial batch responses %t",
			p.BatchSize, p.MaxBatchingWindow, p.MaxConcurrency, p.Timeout, p.ReportBatchItemFailures),
		fmt.Sprintf("  reconciler  every %s (and once now)", st.Ticker.Every),
		"",
		"Try:",
		"  curl -si -X POST " + st.URL + "/tasks -H 'Content-Type: application/json' \\",
		"       -H \"Idempotency-Key: $(date +%s%N)\" -d '{\"kind\":\"generate\",\"input\":{\"prompt\":\"Say hello\"}}'",
		"  curl -s " + st.URL + "/tasks/<task_id>",
		"  " + awsCLI + "aws --endpoint-url " + st.Endpoint + " --region " + st.AWS.Region + " dynamodb scan --table-name " + st.Names.TasksTable,
	}
	if example != nil {
		lines = append(lines,
			"  # deliver to the example lambda destination (functions/exampledestination under aws-lambda-rie, "+example.URL+"):",
			"  curl -si -X POST "+st.URL+"/tasks -H 'Content-Type: application/json' -H \"Idempotency-Key: $(date +%s%N)\" \\",
			"       -d '{\"kind\":\"deliver\",\"input\":{\"destination\":\"lambda\",\"params\":{\"function\":\"example\"},\"payload\":{\"text\":\"hello\"}}}'",
			"  # ask it directly whether it acted (the lookup the reconciler uses):",
			"  curl -s "+example.InvokeURL+" -d '{\"action\":\"lookup\",\"operation_id\":\"<task_id>\"}'",
		)
	}
	if st.Notify != nil {
		read := "the emulator's SES keeps them"
		if st.Embedded {
			read = "read them: curl -s " + st.Endpoint + "/kumo/ses/v2/sent-emails"
		}
		lines = append(lines,
			"  # notifications (approvers of a gated task, a signed-in requester) are emails through the emulator's SES;",
			"  # "+read)
	}
	lines = append(lines, "", "Ctrl-C stops everything. Progress:")
	fmt.Println(strings.Join(lines, "\n"))
}

func authLine(a api.AuthConfig) string {
	if a.Mode != "jwt" {
		return "none — no authorizer: the API is open to anyone who can reach  this port (set TASKLEDGER_OIDC_ISSUER to require sign-in)"
	}
	return "jwt — issuer " + a.Issuer + ", client id " + a.ClientID + " (emulated API Gateway JWT authorizer on /tasks)"
}

// queueName is the last path element of a queue URL.
func queueName(url string) string {
	return url[strings.LastIndex(url, "/")+1:]
}
