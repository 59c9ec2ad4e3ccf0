// Package wsgateway emulates an API Gateway WebSocket API for make run: a
// loopback HTTP server that upgrades a client's connection, runs the
// $connect route (after an optional authorizer, as a REQUEST authorizer
// runs before it), routes each text message by its "action" field to the
// route of that name (or $default) and sends the route's response body
// back, runs $disconnect when the connection ends, and serves the
// management API's POST /@connections/{connection_id}, which sends the
// body to that connection or answers 410 Gone (as AWS does) when it no
// longer exists.
//
// The route handler has the signature of a Lambda WebSocket proxy
// integration (events.APIGatewayWebsocketProxyRequest in,
// events.APIGatewayProxyResponse out), so the same handler type serves in
// AWS and here. WebSocket framing is github.com/coder/websocket's.
package wsgateway
