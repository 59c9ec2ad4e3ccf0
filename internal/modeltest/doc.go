// Package modeltest is a model-based test of taskledger's promise
// (DESIGN.md §1).
package modeltest
