// Package lambdaenv is what the three Lambda mains share: reading the
// variables template.yaml sets on every function, loading the AWS
// configuration (bounded SDK retries) and building the ledger — and failing
// init with one clear message when something is missing, so a
// misconfigured function never starts serving. LoadProvider is the one
// reader of the worker's provider, model and admission limits (PROVIDER,
// PROVIDER_MODEL, PROVIDER_ADMISSION): the worker admits its calls by
// them, and the submit function refuses a task the worker could never run.
package lambdaenv
