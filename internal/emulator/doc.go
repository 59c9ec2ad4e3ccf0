// Package emulator starts the AWS-compatible engines taskledger runs
// against outside AWS: the embedded kumo emulator (in-process) and moto
// (a moto_server child process on a free 127.0.0.1 port). Tests (through
// internal/testenv), the soak and the bench share it.
//
// moto is served by moto_serial.py: moto's own handlers with DynamoDB
// requests behind a lock. Plain moto_server evaluates a DynamoDB condition
// and applies the write without a lock, so two concurrent conditional puts
// on one item can both succeed — which DynamoDB never allows. SQS requests
// stay outside the lock so a long poll does not stall other calls.
// DynamoDB and SQS calls go straight to moto's handler of the service on a
// connection kept open; every other call takes moto_server's own WSGI
// path (BenchmarkMotoUpdateItem reports moto's CPU per write). When
// python3 on PATH has no moto (or no flask, flask_cors or werkzeug), plain
// moto_server is started instead. The packages are found, not imported (an
// import costs most of a second in every test process), so a moto whose
// own dependencies are broken is not skipped: its launcher exits at once
// and StartMoto returns the start of its output.
//
// [LegEndpoint], [LegFor] and [StopLegs] are the shared per-process legs
// for test suites that need no tables or queues (internal/payload's S3
// tests): the same kumo/moto/external selection (TASKLEDGER_BACKENDS) and
// TASKLEDGER_REQUIRE_MOTO rule as internal/testenv.
package emulator
