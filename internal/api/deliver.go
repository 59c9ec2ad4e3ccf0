package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/taskledger/taskledger/internal/destination"
)

// A deliver task (DESIGN §10) is submitted like a generate task —
// {"kind":"deliver","input":{"destination":…,"params":{…},"payload":{…}}}
// with a business Idempotency-Key, deduplicated the same way (the payload
// hash covers kind and input) — and validated strictly before anything is
// written: the input's shape (destination.ParseDeliverInput), then that the
// destination is configured and its params are valid for it. Errors name
// fields and rules, never a value from params or payload.

// deliverInputProblem checks the shape of a deliver input (canonical JSON).
func deliverInputProblem(canon []byte) *Problem {
	_, err := destination.ParseDeliverInput(canon)
	if err == nil {
		return nil
	}
	var ie *destination.InputError
	if !errors.As(err, &ie) {
		return newProblem(TypeInvalidInput, http.StatusBadRequest, "Invalid task input", "The deliver input is not valid.").withField("input")
	}
	field := "input"
	if ie.Field != "" {
		field += "." + ie.Field
	}
	return newProblem(TypeInvalidInput, http.StatusBadRequest, "Invalid task input", field+": "+ie.Problem).withField(field)
}

// checkDeliver checks a well-formed deliver input against the configured
// destinations.
func (h *Handler) checkDeliver(input string) *Problem {
	in, err := destination.ParseDeliverInput(json.RawMessage(input))
	if err != nil {
		return deliverInputProblem([]byte(input))
	}
	if err := h.Destinations.Check(in); err != nil {
		return h.destinationProblem(err, "input", TypeInvalidInput, "Invalid task input")
	}
	return nil
}

// destinationProblem maps a destination registry's refusal of the
// destination or params found at prefix ("input" for a deliver submit,
// "deliver[i]" for a plan entry) to a 400 of type typ naming the field.
func (h *Handler) destinationProblem(err error, prefix, typ, title string) *Problem {
	var ud *destination.UnknownDestinationError
	var pe *destination.ParamsError
	switch {
	case errors.As(err, &ud):
		known := "none are configured"
		if names := h.Destinations.Names(); len(names) > 0 {
			known = "the configured destinations are " + strings.Join(names, ", ")
		}
		return newProblem(typ, http.StatusBadRequest, title,
			fmt.Sprintf("%s.destination: %q is not a configured destination; %s.", prefix, ud.Name, known)).withField(prefix + ".destination")
	case errors.As(err, &pe):
		field := prefix + ".params"
		if pe.Field != "" {
			field += "." + pe.Field
		}
		return newProblem(typ, http.StatusBadRequest, title, prefix+".params: "+pe.Error()).withField(field)
	}
	// A destination refusing its params in its own words (a webhook
	// naming an endpoint that is not configured).
	return newProblem(typ, http.StatusBadRequest, title, prefix+".params: "+clip(err.Error(), 300)).withField(prefix + ".params")
}

// regenerateDeliver refuses POST /tasks/{id}/regenerate on a deliver task:
// a delivery is not regenerated, it is a new deliver task with its own key.
func regenerateDeliver(id string) *Problem {
	return newProblem(TypeStateConflict, http.StatusConflict, "Not a generate task",
		fmt.Sprintf("Task %s is a deliver task; deliveries are not regenerated. Submit a new deliver task with its own Idempotency-Key.", id))
}

// checkPlan checks a submission's deliver plan against the configured
// destinations, entry by entry, as a direct deliver submit is checked: an
// approval must never create a delivery that can only be parked for its
// configuration. Without configured destinations (nil) the plan is
// checked for its shape only, and an unknown destination is parked
// destination_config when its delivery runs.
func (h *Handler) checkPlan(pl plan) *Problem {
	if h.Destinations == nil {
		return nil
	}
	for i, e := range pl.deliveries {
		if err := h.Destinations.Check(destination.DeliverInput{Destination: e.Destination, Params: e.Params}); err != nil {
			return h.destinationProblem(err, fmt.Sprintf("deliver[%d]", i), TypeInvalidBody, "Invalid request body")
		}
	}
	return nil
}
