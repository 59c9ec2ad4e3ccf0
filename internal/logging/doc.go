// Package logging sets up log/slog JSON logs for the Lambda functions and the
// local runner: one JSON object per line, with the Lambda request id taken
// from the context, and only ids, hashes and sizes — never task text, results
// or credentials. Attributes whose key names a secret are redacted as a last
// line of defence.
package logging
