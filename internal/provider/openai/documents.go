package openai

import "errors"

// ErrDocumentsUnsupported is the permanent refusal of a request that
// carries documents: the chat completions request this adapter sends has
// no portable document part, and dropping the documents would answer a
// different question than the one submitted. The task fails (class
// permanent_input) without a call.
//
// AcceptsDocuments says the same ahead of any call: the submit function
// refuses such a task (provider.Config.AcceptsDocuments) before it is
// recorded, and this refusal stays as the backstop.
var ErrDocumentsUnsupported = errors.New("openai: this provider does not accept documents")

// AcceptsDocuments is false: every request with documents is refused
// (ErrDocumentsUnsupported).
const AcceptsDocuments = false
