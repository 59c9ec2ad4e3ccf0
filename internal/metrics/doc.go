// Package metrics writes CloudWatch Embedded Metric Format (EMF) records:
// one JSON object per line on stdout, which Lambda ships to CloudWatch Logs
// and CloudWatch turns into metrics without any API call (no PutMetricData,
// no extra IAM, no latency on the handler's path).
//
// A Record collects metrics that share dimensions; Flush writes it. The
// format is the documented "_aws" envelope: Timestamp (epoch ms) and
// CloudWatchMetrics [{Namespace, Dimensions, Metrics[{Name, Unit}]}], with
// each metric's value and each dimension's value as top-level members.
package metrics
