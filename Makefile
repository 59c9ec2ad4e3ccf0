# taskledger — build, test, run, deploy.
# Two commands matter on a fresh machine: `make run` and `make test`.

GO        ?= go
PKGS      := ./...
FUNCTIONS := submit worker reconciler
GOARCH_DEPLOY ?= arm64
BIN       := bin
LDFLAGS   := -s -w
ADDR      ?= 127.0.0.1:3000
N         ?= 2000

.PHONY: all run test test-go lint vet fmt-check cfn-lint deps build clean bench soak \
        localstack-test deploy logs $(addprefix invoke-,$(FUNCTIONS))

all: build

## run: the whole stack locally (embedded emulator, simulated provider)
run:
	ADDR=$(ADDR) $(GO) run ./cmd/taskledger-local

## test: everything CI runs (lint, unit + integration on kumo and moto)
test: lint test-go

lint: vet fmt-check cfn-lint

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

cfn-lint:
	cfn-lint template.yaml

test-go:
	$(GO) test -count=1 -timeout 20m $(PKGS)

## deps: test dependencies that are not Go modules (browser test)
deps:
	@true

## build: stripped linux/arm64 bootstrap binaries for deployment
build: $(addprefix build-,$(FUNCTIONS))
	@ls -l $(BIN)/*/bootstrap | awk '{printf "%-40s %8.1f KiB\n", $$9, $$5/1024}'

build-%:
	@mkdir -p $(BIN)/$*
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_DEPLOY) $(GO) build -tags lambda.norpc -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/$*/bootstrap ./functions/$*

clean:
	rm -rf $(BIN) .aws-sam
