package soak

// PendingFixes are invariants the soak tests only log instead of failing
// on. Issue 11's fixes are merged, so it is empty: every violation fails.
var PendingFixes = map[string]bool{}

// Split divides violations into those of PendingFixes and the rest.
func Split(vs []Violation) (pending, other []Violation) {
	for _, v := range vs {
		if PendingFixes[v.Rule] {
			pending = append(pending, v)
		} else {
			other = append(other, v)
		}
	}
	return pending, other
}
