# taskledger — build, test, run, deploy.
# Two commands matter on a fresh machine: `make run` and `make test`.

GO        ?= go
PKGS      := ./...
FUNCTIONS := submit worker reconciler stream
GOARCH_DEPLOY ?= arm64
BIN       := bin
LDFLAGS   := -s -w
ADDR      ?= 127.0.0.1:3000
N         ?= 2000

.PHONY: all run demo test test-go lint vet fmt-check cfn-lint deps build clean bench soak \
        localstack-test deploy logs $(addprefix invoke-,$(FUNCTIONS))

all: build

## run: the whole stack locally (embedded emulator, simulated provider)
# Built, then exec'd (not `go run`): Ctrl-C and SIGTERM reach the stack
# itself, which shuts down cleanly and leaves no process behind.
run:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/taskledger-local ./cmd/taskledger-local
	ADDR=$(ADDR) exec $(BIN)/taskledger-local

## demo: the seed workflows (000, 001, 004) against the local stack, through
## the HTTP API; prints each receipt, exits non-zero if a scenario fails
demo:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/taskledger-demo ./cmd/taskledger-demo
	exec $(BIN)/taskledger-demo

## test-rie: the bootstrap binaries under the Lambda Runtime Interface Emulator
## with every events/ sample (also part of test-go; here RIE is required)
.PHONY: test-rie
test-rie:
	TASKLEDGER_REQUIRE_RIE=1 $(GO) test -count=1 -v -run TestArtifactsMatchInProcess ./internal/rietest

## test: everything CI runs (lint, unit + integration on kumo and moto)
test:
	@$(MAKE) --no-print-directory test-go WITH_LINT=1

lint: vet fmt-check cfn-lint

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

cfn-lint:
	cfn-lint template.yaml

## staticcheck: honnef.co/go/tools at the pinned version (CI runs it; built from the module proxy on first use)
STATICCHECK_VERSION ?= v0.8.2
.PHONY: staticcheck
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

## test-go: the unit and integration tests (kumo and moto legs, browser, RIE).
# With ./..., in two phases (docs/testing.md: where the time goes):
#  1. The soak package, whose rules are real-time rules (leases of seconds,
#     invocation deadlines; its moto leg is the suite's most load-sensitive
#     test), beside its companions: under make test the lint, then every
#     package but the soak and AFTER_SOAK, the slowest (BESIDE_SOAK) first,
#     two at a time, all at the lowest CPU priority (nice 19), so they take
#     only the CPU the soak leaves. Beside the other packages at the same
#     priority the soak's moto leg missed fault kinds; alone it left most
#     of a core idle for two minutes.
#  2. When the soak ends, AFTER_SOAK, three packages at a time (-p 3), the
#     slowest named first so that none starts late and runs on alone at
#     the end: the packages that wait on clocks of their own (the browser
#     tests, the demo, the worker's and the reconciler's leases, the
#     benchmarks' budgets), and the emulator's, which asserts the priority
#     its moto servers run at and so cannot run at nice 19. Companions
#     still running go on at nice 19 in the CPU the rest leaves.
# Each part's output is printed when it ends, the companions' last.
# -parallel 8: most parallel tests wait on an emulator, a browser or a timer
# rather than use a core. The moto legs of one package share a few
# moto_servers (internal/testenv's pool). Under make test the lint runs the
# whole of go vet, so go test skips its own subset (-vet=off).
# -ldflags=-w: the test binaries carry no DWARF (stack traces keep their
# symbols); linking some sixty binaries that each hold the AWS SDK and the
# embedded emulator took about a third less CPU without it.
BESIDE_SOAK := ./pkg/ledger ./internal/api ./internal/modeltest ./internal/templatetest \
               ./internal/tasklist ./internal/spend ./internal/stack
AFTER_SOAK  := ./web ./internal/worker ./internal/demo ./internal/reconciler \
               ./internal/bench ./internal/e2e ./internal/local ./cmd/taskledger-local \
               ./internal/emulator
# GOGC=400 (unless set): the compiler, the linker, vet and the test
# binaries collect garbage a quarter as often; on this 2-core machine with
# memory to spare, compiling and linking every test binary took about a
# fifth less CPU.
test test-go: export GOGC ?= 400
GOTEST      := $(GO) test -count=1 -timeout 20m -parallel 8 -ldflags=-w$(if $(WITH_LINT), -vet=off)
# The moto zygote (internal/emulator: EnvMotoZygote) forks every moto
# server the tests start with moto already imported: a fresh interpreter
# spent about a second of CPU on imports in each of the dozens of servers.
# It dies with the recipe's shell; without python3 and moto it never
# listens, and the tests start their own servers (or say moto is missing).
define start-moto-zygote
zsock=$$(mktemp -u "$${TMPDIR:-/tmp}/moto-zygote-XXXXXX"); \
python3 internal/emulator/moto_serial.py --zygote $$zsock >/dev/null 2>&1 & zpid=$$!; \
for i in $$(seq 300); do test -S $$zsock && break; kill -0 $$zpid 2>/dev/null || break; sleep 0.1; done; \
if test -S $$zsock; then export TASKLEDGER_MOTO_ZYGOTE=$$zsock; fi;
endef
test-go:
ifeq ($(PKGS),./...)
	@soaklog=$$(mktemp); besidelog=$$(mktemp); $(start-moto-zygote) \
	trap 'rm -f $$soaklog $$besidelog $$zsock; kill $$zpid 2>/dev/null' EXIT; t0=$$(date +%s); \
	echo "$(GOTEST) ./internal/soak, beside it at nice 19:$(if $(WITH_LINT), lint,) $(BESIDE_SOAK) and every package but the soak and AFTER_SOAK (their output when they end)"; \
	$(GOTEST) ./internal/soak > $$soaklog 2>&1 & soak=$$!; \
	( lint=0; $(if $(WITH_LINT),nice -n 19 $(MAKE) --no-print-directory lint || lint=1;) \
	  nice -n 19 $(GOTEST) -p 2 $(BESIDE_SOAK) $$($(GO) list ./... | grep -v -e '/internal/soak$$' $(foreach p,$(AFTER_SOAK),-e '$(patsubst ./%,/%,$(p))$$')); beside=$$?; \
	  echo "make test-go: beside the soak done at $$(( $$(date +%s) - t0 )) s"; \
	  exit $$(( lint * 2 + (beside != 0) )) ) > $$besidelog 2>&1 & companions=$$!; \
	wait $$soak; soakrc=$$?; cat $$soaklog; \
	echo "make test-go: soak done at $$(( $$(date +%s) - t0 )) s; $(GOTEST) -p 3 (the rest)"; \
	$(GOTEST) -p 3 $(AFTER_SOAK); rest=$$?; \
	echo "make test-go: the rest done at $$(( $$(date +%s) - t0 )) s"; \
	wait $$companions; c=$$?; cat $$besidelog; lint=$$(( c / 2 )); beside=$$(( c % 2 )); \
	failed=""; \
	for r in "lint $$lint" "soak $$soakrc" "beside-the-soak $$beside" "rest $$rest"; do \
	  set -- $$r; test "$$2" -eq 0 || failed="$$failed $$1"; done; \
	if [ -n "$$failed" ]; then echo "make test-go: failed:$$failed (each ran to its end; their output is above)"; exit 1; fi
else
	$(if $(WITH_LINT),$(MAKE) --no-print-directory lint)
	@$(start-moto-zygote) trap 'rm -f $$zsock; kill $$zpid 2>/dev/null' EXIT; \
	echo "$(GOTEST) $(PKGS)"; $(GOTEST) $(PKGS)
endif

## deps: test dependencies that are not Go modules (browser tests): Debian
## chromium, npm playwright-core (never a browser build of its own) and
## oauth2-mock-server (the sign-in test's OpenID Connect issuer)
deps:
	@if [ -x /usr/bin/chromium ]; then echo "deps: chromium present: $$(/usr/bin/chromium --version 2>/dev/null)"; \
	else echo "deps: installing Debian chromium (apt-get)"; \
	  (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) || { echo "deps: apt-get install chromium failed (root needed)" >&2; exit 1; }; fi
	@command -v node >/dev/null || { echo "deps: node (>= 20) is missing; the browser test needs it" >&2; exit 1; }
	@if [ -f web/test/node_modules/playwright-core/package.json ] && [ -f web/test/node_modules/oauth2-mock-server/package.json ]; then echo "deps: web/test/node_modules present"; \
	else echo "deps: npm ci in web/test (playwright-core, oauth2-mock-server from package-lock.json)"; \
	  cd web/test && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund; fi

## browser-test: the page in headless chromium against an in-process local stack (screenshots in web/test/screenshots)
browser-test: deps
	TASKLEDGER_REQUIRE_BROWSER=1 $(GO) test -count=1 -v -run 'TestBrowser|TestPageLogic|TestFS' ./web

## soak: N tasks (default 2000) through the real handlers and emulated event
## sources with faults injected on a seeded schedule, once per provider mode
## (MODES, default all three, in sequence); checks every invariant and prints
## fault kind x injected x final states x violations per mode (TASKLEDGER_BACKEND=moto optional)
MODES     ?= idempotent,plain,plain+readback
soak:
	$(GO) run ./cmd/taskledger-soak -n $(N) -modes $(MODES)

## bench: AWS calls per task vs DESIGN §9, full vs bare pipeline throughput,
## submit latency, bootstrap sizes and init, reconciler reads vs history,
## cost per task vs baselines (USD per million), latency vs the call floor
bench:
	$(GO) run ./cmd/taskledger-bench

## build: stripped linux/arm64 bootstrap binaries for deployment (bin/<fn>/bootstrap)
# One command line for every Lambda artifact, here and under `sam build`.
GOBUILD_LAMBDA = CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_DEPLOY) $(GO) build -buildvcs=false \
                 -tags lambda.norpc -trimpath -ldflags '$(LDFLAGS)'

build: $(addprefix build-,$(FUNCTIONS))
	@for f in $(FUNCTIONS); do b=$(BIN)/$$f/bootstrap; \
	  printf '%-26s %7d KiB  %s\n' $$b $$(( $$(wc -c < $$b) / 1024 )) \
	    "$$($(GO) version -m $$b | awk '$$2 ~ /^GO(OS|ARCH)=/ {printf "%s ", $$2}')"; done

build-%:
	@mkdir -p $(BIN)/$*
	$(GOBUILD_LAMBDA) -o $(BIN)/$*/bootstrap ./functions/$*

# `sam build` (Metadata BuildMethod: makefile, CodeUri: .) runs
# `make build-<LogicalId>` with ARTIFACTS_DIR set and packages what lands there.
# One root go.mod serves all three functions; SAM's go1.x builder wants a
# go.mod per function, so the makefile method is the one that fits.
.PHONY: build-SubmitFunction build-WorkerFunction build-ReconcilerFunction build-ExampleDestinationFunction build-StreamFunction
build-SubmitFunction build-WorkerFunction build-ReconcilerFunction build-ExampleDestinationFunction build-StreamFunction:
	$(if $(ARTIFACTS_DIR),,$(error $@: ARTIFACTS_DIR is not set (sam build sets it)))
	$(GOBUILD_LAMBDA) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(SAM_FN_$(@:build-%=%))

SAM_FN_SubmitFunction     := submit
SAM_FN_WorkerFunction     := worker
SAM_FN_ReconcilerFunction := reconciler
SAM_FN_ExampleDestinationFunction := exampledestination
SAM_FN_StreamFunction     := stream

## deploy: sam build + sam deploy (--guided the first time, until samconfig.toml
## holds the stack's settings; STACK names the stack for later targets)
STACK ?= taskledger
SAM   ?= sam
deploy:
	$(SAM) build --build-in-source --parallel
	@if [ -f samconfig.toml ] && grep -q '^stack_name' samconfig.toml; then \
	  echo "$(SAM) deploy (settings from samconfig.toml)"; $(SAM) deploy; \
	else \
	  echo "$(SAM) deploy --guided (first deployment: answers are saved to samconfig.toml)"; \
	  $(SAM) deploy --guided --stack-name $(STACK) --capabilities CAPABILITY_IAM; \
	fi

## invoke-<fn>: run a built function in SAM's Lambda container (Docker) with
## an events/ sample: EVENT=events/x.json to choose another. With STACK set,
## the function gets the deployed function's environment (tables, queues,
## auth settings, the task id key secret, read with your credentials).
EVENT_submit     ?= events/apigw-submit-new.json
EVENT_worker     ?= events/sqs-batch.json
EVENT_reconciler ?= events/scheduler-tick.json
EVENT_stream     ?= events/ws-subscribe.json
STACK_GIVEN := $(filter command environment,$(firstword $(origin STACK)))
$(addprefix invoke-,$(FUNCTIONS)): invoke-%:
	@test -d .aws-sam/build || $(SAM) build --build-in-source --parallel
	@if [ -n "$(STACK_GIVEN)" ]; then \
	  fn=$$(aws cloudformation describe-stack-resource --stack-name $(STACK) --logical-resource-id $(SAM_FUNCTION_$*) \
	    --query StackResourceDetail.PhysicalResourceId --output text) && \
	  aws lambda get-function-configuration --function-name "$$fn" \
	    --query '{Parameters: Environment.Variables}' --output json > .aws-sam/env-$(STACK).json || exit 1; \
	  env="--env-vars .aws-sam/env-$(STACK).json"; \
	fi; \
	$(SAM) local invoke $(SAM_FUNCTION_$*) --event $(or $(EVENT),$(EVENT_$*)) $$env

SAM_FUNCTION_submit     := SubmitFunction
SAM_FUNCTION_worker     := WorkerFunction
SAM_FUNCTION_reconciler := ReconcilerFunction
SAM_FUNCTION_stream     := StreamFunction

## logs: tail the deployed functions' CloudWatch logs (FN=WorkerFunction for one)
logs:
	$(SAM) logs --stack-name $(STACK) --tail $(if $(FN),--name $(FN))

## localstack-test: the integration suites against LocalStack on
## http://localhost:4566 (needs Docker with the compose plugin; see localstack/)
LOCALSTACK_COMPOSE ?= docker compose -f localstack/docker-compose.yml
localstack-test:
	$(LOCALSTACK_COMPOSE) up -d --wait --wait-timeout 180
	@AWS_ENDPOINT_URL=http://localhost:4566 AWS_REGION=us-east-1 \
	  AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_PROFILE= \
	  TASKLEDGER_BACKENDS=external $(GO) test -count=1 -timeout 30m $(PKGS); \
	status=$$?; \
	if [ -z "$(KEEP)" ]; then $(LOCALSTACK_COMPOSE) down -v; else echo "KEEP set: LocalStack left running"; fi; \
	exit $$status

clean:
	rm -rf $(BIN) .aws-sam
