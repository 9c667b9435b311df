// Package requestcontrol runs the request pipeline around the scheduler: data
// producers in dependency order, the scheduling cycle, and pre-request hooks,
// returning the endpoints exactly as they go into
// x-gateway-destination-endpoint. Errors come back as *Rejection carrying the
// HTTP status and the x-llm-d-request-dropped-reason value.
//
// Parsing, model rewrite, admission, flow control and response hooks plug in
// around Director.Schedule as their own stages.
package requestcontrol
