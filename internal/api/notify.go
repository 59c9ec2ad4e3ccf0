package api

import (
	"encoding/json"
	"net/mail"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/taskledger/taskledger/internal/destination"
	"github.com/taskledger/taskledger/internal/followup"
)

// requesterEmail is the address a submit records on its task for the
// requester's notifications (followup.Config.Requester.Email): the JWT's
// email claim — unless the token says it is not verified — when the email
// destination allows it; "" otherwise (and without such notifications, so
// a task carries no address nobody mails).
func (h *Handler) requesterEmail(rc events.APIGatewayV2HTTPRequestContext) string {
	if !h.Notify.RequesterEmail() || h.Destinations == nil {
		return ""
	}
	var email string
	switch {
	case rc.Authorizer != nil && rc.Authorizer.JWT != nil:
		claims := rc.Authorizer.JWT.Claims
		if strings.EqualFold(strings.Trim(claims["email_verified"], `"`), "false") {
			return ""
		}
		email = claims["email"]
	case h.Auth.Mode == "none" && rc.Authorizer == nil:
		// No authorizer at all: the one local user (Requester.AnonymousEmail).
		email = h.Notify.Requester.AnonymousEmail
	}
	a, err := mail.ParseAddress(strings.TrimSpace(email))
	if err != nil || a.Name != "" || len(a.Address) > 254 {
		return ""
	}
	params, _ := json.Marshal(map[string][]string{"to": {a.Address}})
	if h.Destinations.Check(destination.DeliverInput{Destination: followup.EmailDestination, Params: params}) != nil {
		return ""
	}
	return strings.ToLower(a.Address)
}
