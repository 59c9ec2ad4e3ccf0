// Package testenv gives tests real DynamoDB and SQS engines to run against.
//
// Conditional writes are only proven against engines that evaluate them, so
// every integration test runs once per backend, as subtests named after it
// (TestX/kumo, TestX/moto, TestX/external):
//
//   - kumo: the embedded github.com/sivchari/kumo emulator, in-process
//     (always available);
//   - moto: moto_server started on a free 127.0.0.1 port when it is on PATH;
//     otherwise the leg is skipped with the reason printed — unless
//     TASKLEDGER_REQUIRE_MOTO=1 (set by CI), when its absence fails the test;
//   - external: the endpoint in AWS_ENDPOINT_URL (LocalStack, a real account),
//     only when TASKLEDGER_BACKENDS names it.
//
// TASKLEDGER_BACKENDS (comma-separated, default "kumo,moto") selects legs.
// Every test gets its own tables, queues and payload bucket, created from
// template.yaml by internal/stack under a unique prefix; on the external
// backend they are deleted at the end of the test, on kumo and moto they
// are left to end with the server (Env.Disposable). Servers are
// shared per test binary and stopped by Main (call it from TestMain): one
// kumo, and a pool of up to MotoServers moto_servers (moto serves one
// DynamoDB request at a time), each Env on the least used; a moto_server
// child also dies with the test process (Pdeathsig).
package testenv
