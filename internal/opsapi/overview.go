package opsapi

import "net/http"

// overview serves GET /overview: counts only (live tasks per state, oldest
// age per state, open reviews by reason, per-minute rates), never task
// text or ids. See internal/overview for what a read costs.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	if h.Overview == nil {
		writeProblem(w, http.StatusNotFound, "not-found", "No overview", "this server has no overview configured")
		return
	}
	o, err := h.Overview.Read(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}
