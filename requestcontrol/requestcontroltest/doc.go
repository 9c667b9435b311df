// Package requestcontroltest is the test kit for request-control plugins and
// for adapters: it builds a Director over fake endpoints, drives it with fake
// transport events (a request, then response headers, body chunks cut at any
// byte, an upstream failure or a client that goes away), and records what
// the hooks saw, so a test can check that in-flight accounting is released
// on every path.
//
//	d := requestcontroltest.NewDirector(t, requestcontroltest.Config{Plugins: []any{rec}})
//	res := requestcontroltest.Do(ctx, d, requestcontroltest.Chat("m", "hi"),
//		requestcontroltest.Response{Chunks: requestcontroltest.Split(sse, 7)})
//	// res.Body is what the client received; rec.Open() == 0
package requestcontroltest
