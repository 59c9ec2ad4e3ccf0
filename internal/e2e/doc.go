// Package e2e holds end-to-end tests that cross the three handlers — the
// submit API, the reconciler and the worker — on real engines (kumo and
// moto), for promises no single handler can keep alone. It has no non-test
// code.
package e2e
