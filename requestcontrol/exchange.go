package requestcontrol

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// ErrIncomplete is the error the ResponseComplete hooks see when an Exchange
// is closed before its response ended.
var ErrIncomplete = errors.New("requestcontrol: the exchange closed before the response ended")

// Exchange is one admitted request from its pick to the last byte of its
// response. The adapter forwards Body with Headers to Decision.Endpoints,
// then feeds the response through ResponseHeaders and ResponseBody, and
// closes the Exchange when it is done with it, whatever happened:
//
//	x, err := d.HandleRequest(ctx, in)
//	if err != nil { ... answer err.(*Rejection) ... }
//	defer x.Close(nil)
//	... forward x.Body with x.Headers ...
//	x.ResponseHeaders("", status, h)
//	for each chunk { send(x.ResponseBody(chunk, last)) }
//
// The response side runs the response hooks, reads usage with the parser's
// ResponseParser, and rewrites the target model name back to the one the
// client asked for, in non-streaming bodies (buffered up to
// Limits.MaxResponseBytes) and in streams line by line (a name split across
// chunks is held until its line is complete; everything else is forwarded as
// it arrives). ResponseHeaders and ResponseBody are called from one
// goroutine; Close may be called from any, any number of times.
type Exchange struct {
	// Request is the scheduled request.
	Request *scheduling.Request
	// Decision holds the picked endpoints, primary first.
	Decision *Decision
	// Body is the body to forward: the client's, or a copy with the model
	// rewritten.
	Body []byte
	// Headers are the headers to set on the forwarded request:
	// x-gateway-destination-endpoint, content-length when the body changed,
	// and those plugins added. Adapters also remove UntrustedHeaders that
	// are not set here.
	Headers map[string]string

	d      *Director
	ctx    context.Context // for hooks: not cancelled with the request
	stop   func() bool     // unregisters the close-on-cancel callback
	parser parsers.ResponseParser
	from   string // the target model to rewrite back from ("" when no rewrite)
	to     string // the incoming model

	mu        sync.Mutex // guards the fields below against a concurrent Close
	served    *scheduling.Endpoint
	streaming bool
	started   bool // response headers or a chunk seen
	pending   []byte
	out       []byte // reused output buffer of a rewritten stream
	lineOver  bool   // the pending line exceeded the limit and was passed through
	buf       []byte
	overflow  bool
	usage     parsers.Usage
	done      bool
}

func (d *Director) newExchange(ctx context.Context, req *scheduling.Request, dec *Decision, p parsers.Parser) *Exchange {
	x := &Exchange{Request: req, Decision: dec, Body: req.Body.Raw, d: d, ctx: context.WithoutCancel(ctx)}
	x.parser, _ = p.(parsers.ResponseParser)
	if req.TargetModel != req.IncomingModel && req.IncomingModel != "" {
		x.from, x.to = req.TargetModel, req.IncomingModel
	}
	x.Headers = forwardHeaders(req, dec, x.from != "", len(x.Body))
	if primary := dec.Result.PrimaryResult(); len(primary.Endpoints) > 0 {
		x.served = primary.Endpoints[0]
	}
	x.stop = context.AfterFunc(ctx, func() { x.close(context.Cause(ctx)) })
	return x
}

// ResponseHeaders takes the response status and headers as they arrive.
// served is the endpoint that answered ("ip:port"; "" means the primary
// pick). The response hooks may add to h; when the model name is rewritten
// back, Content-Length is removed from h (the body's length may change).
func (x *Exchange) ResponseHeaders(served string, status int, h http.Header) {
	x.mu.Lock()
	if x.done {
		x.mu.Unlock()
		return
	}
	x.started = true
	if served != "" {
		x.served = x.findServed(served)
	}
	ct := strings.ToLower(h.Get("Content-Type"))
	x.streaming = strings.Contains(ct, "text/event-stream") || strings.Contains(ct, "ndjson") ||
		(x.Request.Body.Stream && status < 300 && !strings.Contains(ct, "json"))
	if x.from != "" {
		h.Del("Content-Length")
	}
	ep := x.served
	x.mu.Unlock()
	for _, hk := range x.d.ResponseHeaders {
		func() {
			defer x.d.recoverHook(x.ctx, hk.Name, x.Request.ID)
			hk.Plugin.ResponseHeader(x.ctx, x.Request, ep, h)
		}()
	}
}

// findServed returns the picked endpoint at hostPort, or one outside the
// pick built from it.
func (x *Exchange) findServed(hostPort string) *scheduling.Endpoint {
	for _, pr := range x.Decision.Result.Profiles {
		for _, e := range pr.Endpoints {
			if e.HostPort() == hostPort {
				return e
			}
		}
	}
	return x.served
}

// ResponseBody takes the next chunk of the response body (endOfStream marks
// the last; it may be empty) and returns the bytes to send to the client
// now: chunk itself when nothing is rewritten, otherwise a buffer that is
// valid until the next call. At the end of the stream the Exchange
// completes: the ResponseComplete hooks run with the usage read. After
// Close, chunks pass through unchanged.
func (x *Exchange) ResponseBody(chunk []byte, endOfStream bool) []byte {
	x.mu.Lock()
	if x.done {
		x.mu.Unlock()
		return chunk
	}
	x.started = true
	ep := x.served
	x.mu.Unlock()
	if len(chunk) > 0 {
		for _, hk := range x.d.ResponseChunks {
			func() {
				defer x.d.recoverHook(x.ctx, hk.Name, x.Request.ID)
				hk.Plugin.ResponseChunk(x.ctx, x.Request, ep, chunk)
			}()
		}
	}
	x.mu.Lock()
	var out []byte
	if x.streaming {
		out = x.stream(chunk, endOfStream)
	} else {
		out = x.whole(chunk, endOfStream)
	}
	x.mu.Unlock()
	if endOfStream {
		x.close(nil)
	}
	return out
}

// stream handles a chunk of a streaming response: complete lines are parsed
// for usage and, when rewriting, rewritten; a partial line is held (when
// rewriting) or only remembered for usage.
func (x *Exchange) stream(chunk []byte, end bool) []byte {
	if x.from == "" && x.parser == nil {
		return chunk
	}
	out := x.out[:0]
	data := chunk
	if len(x.pending) > 0 {
		x.pending = append(x.pending, chunk...)
		data = x.pending
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i+1]
		data = data[i+1:]
		if x.lineOver { // the rest of an over-long line: already passed through
			x.lineOver = false
			if x.from != "" {
				out = append(out, line...)
			}
			continue
		}
		x.readLine(line)
		if x.from != "" {
			out = parsers.AppendReplaceModel(out, line, x.from, x.to)
		}
	}
	// data is the partial last line.
	switch {
	case end:
		if !x.lineOver {
			x.readLine(data)
			if x.from != "" {
				out = parsers.AppendReplaceModel(out, data, x.from, x.to)
			}
		} else if x.from != "" {
			out = append(out, data...)
		}
		x.pending = x.pending[:0]
	case len(data) > x.d.Limits.line():
		if x.from != "" {
			out = append(out, data...)
		}
		x.pending, x.lineOver = x.pending[:0], true
	case x.lineOver:
		if x.from != "" {
			out = append(out, data...)
		}
		x.pending = x.pending[:0]
	case len(x.pending) > 0: // data is a suffix of pending
		x.pending = x.pending[:copy(x.pending, data)]
	default:
		x.pending = append(x.pending[:0], data...)
	}
	if x.from == "" {
		return chunk
	}
	x.out = out
	return out
}

// readLine reads usage from a line of a stream: an SSE data line or a
// newline-delimited JSON document.
func (x *Exchange) readLine(line []byte) {
	if x.parser == nil {
		return
	}
	doc, ok := parsers.SSEData(line)
	if !ok {
		doc = bytes.TrimSpace(line)
	}
	if len(doc) == 0 || doc[0] != '{' && doc[0] != '[' {
		return
	}
	x.parseResponse(doc)
}

func (x *Exchange) parseResponse(doc []byte) {
	defer func() {
		if r := recover(); r != nil {
			_ = x.d.panicked(x.ctx, "response parser", x.Request.ID, r)
		}
	}()
	x.parser.ParseResponse(x.Request.Body.API, doc, &x.usage)
}

// whole handles a chunk of a non-streaming response: it is buffered up to
// the limit, then read and rewritten at the end; beyond the limit everything
// passes through as is.
func (x *Exchange) whole(chunk []byte, end bool) []byte {
	if x.overflow {
		return chunk
	}
	if int64(len(x.buf)+len(chunk)) > x.d.Limits.response() {
		x.overflow = true
		x.d.stats.tooLarge.Add(1)
		x.d.log.LogAttrs(x.ctx, slog.LevelWarn, "response larger than the buffer limit passed through without model rewrite or usage",
			slog.String("x-request-id", x.Request.ID), slog.Int64("limit", x.d.Limits.response()))
		out := append(x.buf, chunk...)
		x.buf = nil
		return out
	}
	if !end {
		x.buf = append(x.buf, chunk...)
		return nil
	}
	body := chunk
	if len(x.buf) > 0 {
		body = append(x.buf, chunk...)
	}
	if x.parser != nil && len(body) > 0 {
		x.parseResponse(body)
	}
	if x.from != "" {
		body = parsers.ReplaceModel(body, x.from, x.to)
	}
	x.buf = nil
	return body
}

// Usage returns the usage read so far.
func (x *Exchange) Usage() parsers.Usage {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.usage
}

// Close ends the exchange. err is why it ended early (upstream failure,
// client gone); nil means the adapter is done with it. Unless the response
// already ended, the ResponseComplete hooks run now, with err (or
// ErrIncomplete when err is nil). Close is idempotent and safe to call
// concurrently with the response methods.
func (x *Exchange) Close(err error) {
	if err == nil {
		err = ErrIncomplete
	}
	x.close(err)
}

func (x *Exchange) close(err error) {
	x.mu.Lock()
	if x.done {
		x.mu.Unlock()
		return
	}
	x.done = true
	usage, served := x.usage, x.served
	x.mu.Unlock()
	x.stop()
	x.d.Complete(x.ctx, x.Request, served, usage, err)
}

// Closed reports whether the exchange has ended (its ResponseComplete hooks
// have run or are running).
func (x *Exchange) Closed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.done
}
