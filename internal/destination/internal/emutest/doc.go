// Package emutest gives the destination packages' tests AWS emulators for
// the services destinations use (Secrets Manager, EventBridge, SQS), with the
// legs and switches of internal/testenv: subtests TestX/kumo and TestX/moto
// (TestX/external with TASKLEDGER_BACKENDS=external and AWS_ENDPOINT_URL),
// the moto leg skipped with the reason printed when moto is not installed,
// unless TASKLEDGER_REQUIRE_MOTO=1 makes that a failure. Unlike testenv it
// creates no tables or queues: destination tests make only what they use.
package emutest
