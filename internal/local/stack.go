package local

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/mail"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sivchari/kumo"

	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/taskledger/taskledger/internal/admission"
	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/deliver"
	"github.com/taskledger/taskledger/internal/dispatch"
	"github.com/taskledger/taskledger/internal/followup"
	"github.com/taskledger/taskledger/internal/lambdaenv"
	"github.com/taskledger/taskledger/internal/logging"
	"github.com/taskledger/taskledger/internal/metrics"
	"github.com/taskledger/taskledger/internal/opsapi"
	"github.com/taskledger/taskledger/internal/overview"
	"github.com/taskledger/taskledger/internal/payload"
	"github.com/taskledger/taskledger/internal/provider"
	"github.com/taskledger/taskledger/internal/reconciler"
	"github.com/taskledger/taskledger/internal/stack"
	"github.com/taskledger/taskledger/internal/worker"
	"github.com/taskledger/taskledger/internal/wsgateway"
	"github.com/taskledger/taskledger/pkg/ledger"
	"github.com/taskledger/taskledger/pkg/retrypolicy"
)

// Defaults of Options.
const (
	DefaultAddr   = "127.0.0.1:3000"
	DefaultPrefix = "taskledger-local"
	DefaultLease  = 30 * time.Second
	// DefaultStatusEvery is the period of the status line.
	DefaultStatusEvery = 10 * time.Second
	// EmbeddedPollWait is the poller's long-poll wait on the embedded
	// emulator: kumo wakes a long poll only when a message is sent, not
	// when a delayed or invisible one becomes visible, so a 20 s wait
	// would hold retries back by up to 20 s.
	EmbeddedPollWait = time.Second
)

// Logical ids in template.yaml the local stack wires together.
const (
	workerFunction     = "WorkerFunction"
	reconcilerFunction = "ReconcilerFunction"
	taskQueue          = "TaskQueue"
)

// Options configure Start. The zero value runs the embedded emulator and
// the simulated provider on DefaultAddr.
type Options struct {
	// Addr is the HTTP listen address (DefaultAddr); it must be a loopback
	// address. "127.0.0.1:0" picks a free port (tests).
	Addr string
	// Endpoint is an external AWS endpoint (LocalStack, moto_server, …);
	// "" starts the embedded kumo emulator.
	Endpoint string
	// Region of the AWS clients (default: AWS_REGION, else us-east-1).
	Region string
	// Provider selects the provider (the zero value: simulated, seed 0, no
	// faults). See provider.ConfigFromEnv.
	Provider provider.Config
	// Admission is the provider admission settings (PROVIDER_ADMISSION's
	// JSON, admission.ParseSettings; empty: no admission). As deployed,
	// the worker admits its calls by them and the submit handler refuses a
	// task whose call could never be admitted (see api.ProviderProfile).
	Admission string
	// Destinations configures the deliver destinations (package deliver;
	// the zero value: none — make run registers the simulated ones).
	// Webhook secrets and an EventBridge bus are read from the endpoint.
	Destinations deliver.Config
	// Notify is who is notified of what (TASKLEDGER_NOTIFICATIONS' JSON,
	// package followup; empty: nobody), checked against Destinations.
	Notify string
	// LambdaEndpoint is where the lambda destination invokes functions
	// (StartExampleDestination's Invoke API under RIE); "" uses Endpoint.
	LambdaEndpoint string
	// ReconcileEvery overrides the reconciler's period (default: the
	// template's ScheduleV2 rate).
	ReconcileEvery time.Duration
	// Shards overrides the by_state shard count (default
	// ledger.DefaultShards, as deployed): every reconciler run queries
	// each (partition, shard) stream twice.
	Shards int
	// Lease is the worker's lease (DefaultLease).
	Lease time.Duration
	// PollWait overrides the SQS poller's long-poll wait (default:
	// EmbeddedPollWait on the embedded emulator, DefaultPollWait otherwise).
	PollWait time.Duration
	// StatusEvery is the period of the status line on Progress
	// (DefaultStatusEvery; negative: none).
	StatusEvery time.Duration
	// AllowedOrigins is the submit API's CORS allow-list (empty: none; the
	// page at "/" is same-origin).
	AllowedOrigins []string
	// DirectDeliver is who may submit a deliver task directly, as the
	// template's DirectDeliver (DIRECT_DELIVER; the zero value:
	// ApproversOnly, every caller without an approver claim).
	DirectDeliver api.DirectDeliver
	// TaskIDKey is the server secret task ids are derived with (see
	// ledger.Config.IDKey). Empty: a random key for this process — ids are
	// stable while it runs and the embedded emulator forgets everything on
	// exit; with an external endpoint that keeps its tables, set one (make
	// run: TASK_ID_KEY), or a replay after a restart becomes a new task.
	TaskIDKey ledger.SecretKey
	// SpendConfig is the spend configuration (SPEND_CONFIG's JSON; empty:
	// the template's SpendConfig default). See spend.go.
	SpendConfig string
	// DailyQuotaTokens is the per-caller daily token quota
	// (SPEND_DAILY_QUOTA_TOKENS, as the template's DailyQuotaTokensPerCaller
	// reaches the functions; empty or "0": none, unless SpendConfig sets a
	// daily_quota). See spend.go.
	DailyQuotaTokens string
	// Progress receives human progress lines (nil: discard).
	Progress io.Writer
	// Log receives the handlers' structured logs (nil: discard).
	Log *slog.Logger
	// Prefix names the resources: Prefix+"-"+LogicalId (DefaultPrefix).
	Prefix string
	// OIDCIssuer, when set, puts an emulated API Gateway JWT authorizer
	// (JWTAuthorizer) in front of /tasks…: the issuer URL, exactly as its
	// tokens' iss claim names it. Empty: no authorizer, every caller is
	// anonymous (auth mode "none", as `make run` has it).
	OIDCIssuer string
	// OIDCAudience is the authorizer's audience list (required with
	// OIDCIssuer): the app client id(s).
	OIDCAudience []string
	// OIDCClientID is the client id the page signs in with
	// (GET /auth/config; default: OIDCAudience[0]).
	OIDCClientID string
	// OIDCScopes are the scopes the page asks for (default
	// api.DefaultScopes).
	OIDCScopes string
	// Approvals is who may approve, reject or withdraw, as the deployed
	// submit function reads it (APPROVER_CLAIM, APPROVER_CLAIM_VALUE,
	// ALLOW_SELF_APPROVAL: api.ParseApprovalPolicy). An approver claim
	// needs OIDCIssuer: without sign-in no caller has claims.
	Approvals api.ApprovalPolicy
	// Template is the SAM template (default: template.yaml found by
	// stack.Find).
	Template *stack.Template
	// WrapWorker, when set, wraps the worker as the emulated event source
	// calls it (tests: hold some messages back, as a throttled worker
	// would, by reporting them as batch item failures).
	WrapWorker func(SQSDeliver) SQSDeliver
	// StreamAddr is the emulated WebSocket API's listen address (streamed
	// replies, docs/streaming.md); loopback only; default 127.0.0.1:0 (a
	// free port), advertised as stream_url in GET /auth/config.
	StreamAddr string
	// StreamPoll is how often a streaming attempt looks for new
	// subscribers (stream.DefaultPoll if 0).
	StreamPoll time.Duration
}

// Stack is a running local stack. Its fields are read-only.
type Stack struct {
	// URL is the HTTP base URL ("http://127.0.0.1:3000").
	URL string
	// StreamURL is the emulated WebSocket API (ws://127.0.0.1:port) and
	// StreamGateway the server behind it.
	StreamURL     string
	StreamGateway *wsgateway.Server
	// Endpoint is the AWS endpoint in use (embedded or external).
	Endpoint string
	// Embedded is true when Endpoint is the embedded emulator.
	Embedded bool
	// Auth is what /auth/config reports (Mode "none" without an issuer).
	Auth   api.AuthConfig
	Names  stack.Names
	AWS    aws.Config
	DDB    *dynamodb.Client
	SQS    *sqs.Client
	Ledger *ledger.Ledger
	// Provider is the provider the worker and the reconciler share
	// (*simulated.Provider when simulated).
	Provider provider.Provider
	// Notify is who is notified of what (Options.Notify; nil: nobody).
	Notify *followup.Config
	// Destinations are the deliver destinations the submit handler checks
	// against and the worker and the reconciler share (Sims holds the
	// simulated ones).
	Destinations *deliver.Registry
	// Poller and Ticker are the emulated event sources (do not change their
	// fields).
	Poller *Poller
	Ticker *Ticker

	emu    *kumo.Server
	pause  *pauseSQS
	srv    *http.Server
	wsSrv  *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start brings the stack up: the emulator (or the external endpoint), every
// table and queue of the template, and the three handlers behind their
// emulated event sources. Close it when done; ctx only bounds Start itself.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	addr := o.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	if err := loopback(addr); err != nil {
		return nil, err
	}
	if o.Approvals.Claim != "" && o.OIDCIssuer == "" {
		return nil, fmt.Errorf("local: an approver claim (APPROVER_CLAIM=%s) needs sign-in (TASKLEDGER_OIDC_ISSUER): without it every caller is anonymous and has no claims, so nobody could approve", o.Approvals.Claim)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	log := o.Log
	if log == nil {
		log = logging.Discard()
	}
	prog := newProgress(o.Progress)
	tpl := o.Template
	if tpl == nil {
		path, err := stack.Find()
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		if tpl, err = stack.Load(path); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
	}

	s := &Stack{Endpoint: o.Endpoint}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Endpoint == "" {
		s.emu = kumo.NewServer()
		s.Endpoint = s.emu.URL
		s.Embedded = true
	}

	region := o.Region
	if region == "" && os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		region = "us-east-1"
	}
	s.AWS, err = awsclient.Load(ctx, awsclient.Options{
		Endpoint: s.Endpoint,
		Region:   region,
		// The embedded emulator (and LocalStack) take any credentials; with
		// an external endpoint the usual chain applies when configured.
		StaticCredentials: s.Embedded || !haveCredentials(),
		HTTPClient:        awsclient.DefaultHTTPClient(),
	})
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	s.DDB = awsclient.DynamoDB(s.AWS)
	// DynamoDB disables CRC validation only when it sees an endpoint; the
	// embedded one is in cfg.BaseEndpoint, which it checks.
	s.SQS = awsclient.SQS(s.AWS)

	s.Names, err = tpl.Create(ctx, s.DDB, s.SQS, prefix, func(line string) { prog.printf("stack: %s", line) })
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := tpl.CreateBuckets(ctx, awsclient.S3(s.AWS), prefix, &s.Names, func(line string) { prog.printf("stack: %s", line) }); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	// The HTTP listener comes first: presigned upload URLs name it (the
	// same-origin proxy to the emulator, uploads.go).
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("local: listen on %s: %w", addr, err)
	}
	defer func() {
		if err != nil && s.srv == nil {
			_ = ln.Close()
		}
	}()
	s.URL = "http://" + ln.Addr().String()
	payloads, err := payload.New(awsclient.S3(s.AWS), s.Names.PayloadBucket, payload.Options{PresignEndpoint: s.URL + UploadProxyPath})
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	idKey := o.TaskIDKey
	if len(idKey) == 0 {
		idKey = make(ledger.SecretKey, ledger.MinIDKeyBytes)
		if _, err := rand.Read(idKey); err != nil {
			return nil, fmt.Errorf("local: task id key: %w", err)
		}
	}
	s.Ledger, err = ledger.New(s.DDB, ledger.Config{TasksTable: s.Names.TasksTable, ReviewTable: s.Names.ReviewTable, WatchTable: s.Names.WatchTable, IDKey: idKey, Shards: o.Shards})
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	s.Provider, err = provider.New(ctx, o.Provider)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	pp, err := lambdaenv.NewProvider(o.Provider, o.Admission)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}

	deps := deliver.Deps{}
	if len(o.Destinations.Webhooks) > 0 {
		deps.Secrets = secretsmanager.NewFromConfig(s.AWS)
	}
	if o.Destinations.EventBridge != nil {
		deps.EventBridge = awseb.NewFromConfig(s.AWS)
	}
	if o.Destinations.Lambda != nil {
		deps.Lambda = awslambda.NewFromConfig(s.AWS, func(lo *awslambda.Options) {
			if o.LambdaEndpoint != "" {
				lo.BaseEndpoint = aws.String(o.LambdaEndpoint)
			}
		})
	}
	if o.Destinations.Email != nil {
		ses := sesv2.NewFromConfig(s.AWS)
		deps.SES = ses
		// The emulator's SES may refuse an unverified sender, as SES does
		// (moto); kumo accepts any. Best effort: a real account's identity
		// is verified by its owner.
		if a, err := mail.ParseAddress(o.Destinations.Email.From); err == nil {
			_, domain, _ := strings.Cut(a.Address, "@")
			_, _ = ses.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(domain)})
		}
	}
	if s.Destinations, err = deliver.Build(o.Destinations, deps); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if names := s.Destinations.Names(); len(names) > 0 {
		prog.printf("deliver destinations: %s", strings.Join(names, ", "))
	}
	notify, err := followup.Parse(o.Notify)
	if err == nil {
		err = notify.Check(s.Destinations)
	}
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	s.Notify = notify

	sender := &dispatch.Sender{SQS: s.SQS, QueueURL: s.Names.TaskQueueURL}
	submit := &api.Handler{Ledger: s.Ledger, Dispatch: sender, Log: log, AllowedOrigins: o.AllowedOrigins, Auth: api.AuthConfig{Mode: "none"}, Payloads: payloads, Destinations: s.Destinations, Notify: s.Notify, DirectDeliver: o.DirectDeliver,
		Provider: &api.ProviderProfile{Name: pp.Config.Name, Model: pp.Model, AcceptsDocuments: pp.Config.AcceptsDocuments(), TokensPerMinute: pp.TokensPerMinute()}}
	var authz *JWTAuthorizer
	if o.OIDCIssuer != "" {
		authz, err = NewJWTAuthorizer(ctx, o.OIDCIssuer, o.OIDCAudience, nil, log)
		if err != nil {
			return nil, err
		}
		clientID := o.OIDCClientID
		if clientID == "" {
			clientID = o.OIDCAudience[0]
		}
		submit.Auth = api.AuthConfig{Mode: "jwt", Issuer: o.OIDCIssuer, ClientID: clientID, Scopes: o.OIDCScopes}
		prog.printf("auth: JWT authorizer on /tasks (issuer %s, audience %s)", o.OIDCIssuer, strings.Join(o.OIDCAudience, ","))
	}
	s.Auth = submit.Auth
	submit.Approvals = o.Approvals
	if o.Approvals.Claim != "" {
		prog.printf("approvals: callers whose %s claim holds %q decide; self-approval %t", o.Approvals.Claim, o.Approvals.Value, !o.Approvals.NoSelfApproval)
	}
	// The Overview tab's per-minute rates: the worker's and the
	// reconciler's EMF records, summed per minute (internal/overview).
	rates := overview.NewRates()
	ops := &opsapi.Handler{Ledger: s.Ledger, Dispatch: sender, Log: log, // Hosts: set once bound
		Overview: &overview.Reader{Ledger: s.Ledger, Rates: rates}}
	lease := o.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	work := &worker.Handler{
		Ledger:       s.Ledger,
		Provider:     s.Provider,
		Destinations: s.Destinations,
		Notify:       s.Notify,
		SQS:          s.SQS,
		QueueURL:     s.Names.TaskQueueURL,
		Policy:       retrypolicy.Default(),
		Lease:        lease,
		Log:          log,
		Metrics:      metrics.NewWriter(io.MultiWriter(&metricsSink{p: prog}, rates)),
		Payloads:     payloads,
		// GENERATION_EFFECT_CLASS, as deployed: retry-safe by default.
		RetrySafeGeneration: o.Provider.RetrySafeGeneration(),
	}
	if err := s.startStream(o, authz, work, submit, log, prog); err != nil {
		return nil, err
	}
	s.Auth = submit.Auth
	if err := wireSpend(tpl, o.SpendConfig, o.DailyQuotaTokens, s.DDB, s.Names.TasksTable, submit, work); err != nil {
		return nil, err
	}
	ops.Budgets = submit.Budgets // the page's retry keeps a budget's records, or refuses
	if pp.Admission != nil {
		a, err := admission.New(admission.Config{DB: s.DDB, TasksTable: s.Names.TasksTable, Limits: pp.Admission.Limits()})
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		work.Admission = &worker.Admission{Admitter: a, Model: pp.Model}
		prog.printf("admission: model %s, %d tokens per minute", pp.Model, pp.TokensPerMinute())
	}
	recon := &reconciler.Handler{
		Ledger:       s.Ledger,
		Dispatch:     sender,
		Backlog:      &dispatch.Backlog{SQS: s.SQS, QueueURL: s.Names.TaskQueueURL},
		DLQ:          s.SQS,
		DLQURL:       s.Names.DeadLetterQueueURL,
		Provider:     s.Provider,
		Destinations: s.Destinations,
		Notify:       s.Notify,
		Log:          log,
		Metrics:      metrics.NewWriter(rates),
		Payloads:     payloads,
		Spend:        submit.Budgets, // settles what parked runs still hold
		// GENERATION_EFFECT_CLASS, as deployed: retry-safe by default.
		RetrySafeGeneration: o.Provider.RetrySafeGeneration(),
	}

	// Event sources, configured from the template.
	fns := tpl.Functions()
	var mapping *stack.EventSourceMapping
	for _, m := range tpl.SQSEvents() {
		if m.Function == workerFunction && m.Queue == taskQueue {
			mapping = &m
		}
	}
	if mapping == nil {
		return nil, fmt.Errorf("local: template has no SQS event of %s on %s", workerFunction, taskQueue)
	}
	s.Poller = MappingPoller(*mapping, fns[workerFunction])
	s.pause = newPauseSQS(s.SQS)
	s.Poller.SQS = s.pause
	s.Poller.QueueURL = s.Names.TaskQueueURL
	s.Poller.QueueARN = s.Names.TaskQueueARN
	s.Poller.Region = s.AWS.Region
	s.Poller.PollWait = o.PollWait
	if s.Poller.PollWait <= 0 && s.Embedded {
		s.Poller.PollWait = EmbeddedPollWait
	}
	s.Poller.Deliver = work.Handle
	if o.WrapWorker != nil {
		s.Poller.Deliver = o.WrapWorker(work.Handle)
	}
	s.Poller.Log = log
	s.Poller.OnBatch = func(r BatchReport) {
		if r.Err != nil {
			prog.printf("worker: batch of %d failed as a whole (%v); it comes back after its visibility timeout", r.Records, r.Err)
		}
	}

	var sched *stack.Schedule
	for _, sc := range tpl.Schedules() {
		if sc.Function == reconcilerFunction {
			sched = &sc
		}
	}
	if sched == nil {
		return nil, fmt.Errorf("local: template has no schedule for %s", reconcilerFunction)
	}
	if s.Ticker, err = ScheduleTicker(*sched, fns[reconcilerFunction]); err != nil {
		return nil, err
	}
	if o.ReconcileEvery > 0 {
		s.Ticker.Every = o.ReconcileEvery
	}
	s.Ticker.Region = s.AWS.Region
	s.Ticker.Deliver = func(ctx context.Context, ev json.RawMessage) error {
		sum, err := recon.Handle(ctx, ev)
		if line := reconcilerLine(sum, err); line != "" {
			prog.printf("%s", line)
		}
		return err
	}

	// HTTP: the API (behind the authorizer when there is one), the
	// operator API, and the public routes the submit handler also serves:
	// the page at / and /static/…, and /auth/config.
	ops.Hosts = opsapi.LoopbackHosts(ln.Addr()) // DNS rebinding: only our own address
	mux := http.NewServeMux()
	taskAPI := api.NewHTTPHandler(submit)
	var tasks http.Handler = taskAPI
	if authz != nil {
		tasks = authz.Wrap(taskAPI)
	}
	mux.Handle("/tasks", tasks)
	mux.Handle("/tasks/", tasks)
	mux.Handle("/uploads", tasks)
	mux.Handle("/conversations/", tasks)
	mux.Handle("/approvals", tasks)
	mux.Handle(UploadProxyPath+"/", uploadProxy(s.Endpoint, s.Names.PayloadBucket, s.AWS.Credentials, s.AWS.Region))
	mux.Handle("/reviews", ops)
	mux.Handle("/reviews/", ops)
	mux.Handle("/overview", ops)
	mux.Handle("/", taskAPI)
	s.srv = &http.Server{
		Handler:           prog.logRequests(ops.Guard(mux)), // DNS rebinding: every route
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("local: http server stopped", "error", err.Error())
		}
	}()
	go func() { defer s.wg.Done(); _ = s.Poller.Run(runCtx) }()
	go func() { defer s.wg.Done(); _ = s.Ticker.Run(runCtx) }()
	every := o.StatusEvery
	if every == 0 {
		every = DefaultStatusEvery
	}
	if every > 0 && o.Progress != nil {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); prog.statusLoop(runCtx, s.Ledger, every) }()
	}
	return s, nil
}

// Close stops the HTTP server (waiting for requests in flight), the poller
// and the ticker (waiting for invocations in flight, cancelled after their
// shutdown grace) and the embedded emulator. It is idempotent.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.srv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("local: http shutdown: %w", err))
				_ = s.srv.Close()
			}
			cancel()
		}
		if s.wsSrv != nil {
			_ = s.wsSrv.Close()
			s.StreamGateway.CloseAll()
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		if s.emu != nil {
			s.emu.Close()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// loopback rejects listen addresses that are not on a loopback interface.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("local: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("local: address %q is not a loopback address (the local stack has no authentication; use 127.0.0.1)", addr)
}

// haveCredentials reports whether the environment names AWS credentials
// (keys or a profile); without them an external endpoint is assumed to be
// an emulator that takes the dummy "test" keys.
func haveCredentials() bool {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		if strings.TrimSpace(os.Getenv(k)) != "" {
			return true
		}
	}
	return false
}
