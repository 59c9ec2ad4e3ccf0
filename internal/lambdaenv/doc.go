// Package lambdaenv is what the three Lambda mains share: reading the
// variables template.yaml sets on every function, loading the AWS
// configuration (bounded SDK retries) and building the ledger — and failing
// init with one clear message when something is missing, so a
// misconfigured function never starts serving.
package lambdaenv
