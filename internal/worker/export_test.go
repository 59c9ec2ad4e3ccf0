package worker

// SaveRepeats is save's bound on repeats, for tests that fault every send.
const SaveRepeats = saveRepeats
