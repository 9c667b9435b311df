// Package httpproxy is the HTTP proxy adapter (SPEC §8): a reverse proxy,
// built on net/http alone, that runs the whole request pipeline itself and
// forwards each request to the endpoint the picker chose.
//
//	rt, _ := config.Build(ctx, cfg, std.Registry(), config.Options{})
//	p := &httpproxy.Proxy{Director: rt.Director}
//	srv := httpproxy.NewServer(":8080", p)
//	srv.ListenAndServe()
//
// For each request the Proxy reads the body (bounded: 413 above the
// Director's limit), runs Director.HandleRequest, and sends the body as the
// pipeline left it (model rewritten, Content-Length corrected) to the primary
// endpoint with the picker's headers and X-Gateway-Model-Name; when the
// endpoint gives no answer (the connection cannot be made, or is refused,
// reset or closed before a response) it tries each fallback in order. The response
// goes back through the Exchange: server-sent events are flushed chunk by
// chunk as they arrive with the model name restored, a JSON body is buffered
// (bounded) to restore it and read usage. Rejections get the pipeline's
// status and x-llm-d-request-dropped-reason header; an unreachable upstream
// is a 502, a timed-out one a 504. However a request ends (completed,
// client gone, upstream failed or stalled) its Exchange is closed, so
// in-flight accounting is released.
//
// NewTransport gives a connection pool sized for many concurrent streams,
// NewServer an http.Server with timeouts; "eppkit proxy" wires them up from
// the command line, and loadtest.sh measures them under wrk.
package httpproxy
