package httpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eppkit/eppkit/requestcontrol"
)

// HeaderModelName carries the target model to routers behind the proxy
// (body-based routing).
const HeaderModelName = "X-Gateway-Model-Name"

// Default limits of a Proxy.
const (
	DefaultStreamIdleTimeout = 5 * time.Minute
	DefaultDialTimeout       = 5 * time.Second
	// DefaultResponseHeaderTimeout is long: a non-streaming response's
	// headers come only when the whole completion is done.
	DefaultResponseHeaderTimeout = 10 * time.Minute
)

// Proxy is the HTTP proxy adapter: an http.Handler that runs the request
// pipeline itself (Director.HandleRequest) and forwards the request to the
// picked endpoint, trying the fallbacks in order when it gives no answer
// (the connection cannot be made, or is closed before a response). It sets X-Gateway-Model-Name, streams server-sent events to the
// client as they arrive (flushing each chunk) with the model name rewritten
// back, and answers rejections with the pipeline's status and
// x-llm-d-request-dropped-reason header. The Exchange is closed on every
// exit, so in-flight accounting is released when the client goes away or
// the upstream fails.
//
// Set the fields before serving; a Proxy is safe for concurrent use.
type Proxy struct {
	Director *requestcontrol.Director
	// Transport forwards to the endpoints; nil means a shared
	// NewTransport(Timeouts{}).
	Transport http.RoundTripper
	// Scheme of the endpoint URLs: "http" (default) or "https".
	Scheme string
	// StreamIdleTimeout aborts a response whose body stalls: nothing from
	// the upstream for this long (default 5m). The transport's
	// ResponseHeader timeout bounds the wait for the headers.
	StreamIdleTimeout time.Duration
	// Metrics, when set, receives each request's outcome.
	Metrics requestcontrol.Metrics
	// Logger receives fallbacks and upstream failures; nil discards.
	Logger *slog.Logger

	once      sync.Once
	log       *slog.Logger
	transport http.RoundTripper
	ids       atomic.Uint64
	idPrefix  string
}

var _ http.Handler = (*Proxy)(nil)

func (p *Proxy) init() {
	p.once.Do(func() {
		p.log = p.Logger
		if p.log == nil {
			p.log = slog.New(slog.DiscardHandler)
		}
		p.transport = p.Transport
		if p.transport == nil {
			p.transport = NewTransport(Timeouts{})
		}
		if p.Scheme == "" {
			p.Scheme = "http"
		}
		if p.StreamIdleTimeout <= 0 {
			p.StreamIdleTimeout = DefaultStreamIdleTimeout
		}
		p.idPrefix = "eppkit-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "-"
	})
}

// Timeouts bound the proxy's upstream connections; zero fields take the
// defaults.
type Timeouts struct {
	Dial           time.Duration // connecting to an endpoint (DefaultDialTimeout)
	ResponseHeader time.Duration // from the request sent to the response headers (DefaultResponseHeaderTimeout)
	IdleConn       time.Duration // an idle pooled connection is closed after this (90s)
}

// NewTransport returns a transport tuned for many concurrent streams to a
// few endpoints: large per-host idle pools, no compression (bodies pass
// through as they are), and timeouts on dialing and on response headers.
func NewTransport(t Timeouts) *http.Transport {
	if t.Dial <= 0 {
		t.Dial = DefaultDialTimeout
	}
	if t.ResponseHeader <= 0 {
		t.ResponseHeader = DefaultResponseHeaderTimeout
	}
	if t.IdleConn <= 0 {
		t.IdleConn = 90 * time.Second
	}
	d := &net.Dialer{Timeout: t.Dial, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil, // endpoints are reached directly, whatever HTTP_PROXY says
		DialContext:           d.DialContext,
		MaxIdleConns:          0, // no global limit: bounded per host
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       t.IdleConn,
		TLSHandshakeTimeout:   t.Dial,
		ResponseHeaderTimeout: t.ResponseHeader,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
}

// NewServer returns an http.Server for h with timeouts on reading request
// headers and idle client connections. There is no write timeout: a
// streamed completion may take minutes; Proxy.StreamIdleTimeout bounds a
// stalled one.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 16 MiB body over a slow link
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ServeHTTP runs the pipeline for r and forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	start := time.Now()
	rec := &outcome{}
	if p.Metrics != nil {
		defer func() {
			m := rec.RequestMetrics.Outcome(rec.x)
			m.Duration = time.Since(start)
			p.Metrics.Request(m)
		}()
	}
	body, err := p.readBody(r)
	if err != nil {
		var rej *requestcontrol.Rejection
		if !errors.As(err, &rej) {
			rej = &requestcontrol.Rejection{Status: http.StatusBadRequest, Err: err}
		}
		p.reject(w, rec, rej)
		return
	}
	rec.RequestBytes = int64(len(body))
	id := r.Header.Get("X-Request-Id")
	if id == "" {
		id = p.idPrefix + strconv.FormatUint(p.ids.Add(1), 10)
	}
	headers := make(map[string]string, len(r.Header)+1)
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["x-request-id"] = id
	x, err := p.Director.HandleRequest(r.Context(), &requestcontrol.Inbound{ID: id, Path: r.URL.Path, Headers: headers, Body: body})
	if err != nil {
		p.reject(w, rec, requestcontrol.Reject(err))
		return
	}
	rec.x = x
	var closeErr error
	defer func() { x.Close(closeErr) }()

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	resp, served, err := p.forward(ctx, r, x, id)
	if err != nil {
		closeErr = err
		if r.Context().Err() != nil {
			return // the client went away
		}
		status := http.StatusBadGateway
		if isTimeout(err) {
			status = http.StatusGatewayTimeout
		}
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "upstream request failed", slog.String("x-request-id", id),
			slog.String("endpoints", x.Decision.Header()), slog.String("error", err.Error()))
		rec.Status = status
		writeError(w, status, fmt.Sprintf("upstream %s: %v", served, err))
		return
	}
	defer resp.Body.Close()
	idle := time.AfterFunc(p.StreamIdleTimeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()
	closeErr = p.respond(w, resp, x, served, idle, rec)
	if closeErr != nil && ctx.Err() == nil && r.Context().Err() == nil {
		// The upstream failed mid-response: cut the client's connection so
		// it sees a truncated response, not a complete one.
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "upstream response failed", slog.String("x-request-id", id),
			slog.String("endpoint", served), slog.String("error", closeErr.Error()))
		x.Close(closeErr)
		panic(http.ErrAbortHandler)
	}
	if errors.Is(context.Cause(ctx), errStreamIdle) {
		x.Close(errStreamIdle)
		panic(http.ErrAbortHandler)
	}
}

// readBody reads the request body: in one allocation when its length is
// known and within the Director's limit; otherwise through
// Director.ReadBody, which refuses a body over the limit with a 413.
func (p *Proxy) readBody(r *http.Request) ([]byte, error) {
	limit := p.Director.Limits.MaxRequestBytes
	if limit <= 0 {
		limit = requestcontrol.DefaultMaxRequestBytes
	}
	if n := r.ContentLength; n >= 0 && n <= limit {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, fmt.Errorf("httpproxy: read body: %w", err)
		}
		return b, nil
	}
	return p.Director.ReadBody(r.Body)
}

var errStreamIdle = errors.New("httpproxy: upstream sent nothing within the stream idle timeout")

// outcome collects what the metrics report.
type outcome struct {
	requestcontrol.RequestMetrics
	x *requestcontrol.Exchange
}

// forward sends the request to the picked endpoint, then to each fallback
// while the connection cannot be made. It returns the response and the
// endpoint that gave it (or the last one tried).
func (p *Proxy) forward(ctx context.Context, r *http.Request, x *requestcontrol.Exchange, id string) (*http.Response, string, error) {
	eps := x.Decision.Endpoints
	var err error
	for i, ep := range eps {
		var out *http.Request
		out, err = p.outbound(ctx, r, x, ep, id)
		if err != nil {
			return nil, ep, err
		}
		var resp *http.Response
		resp, err = p.transport.RoundTrip(out)
		if err == nil {
			return resp, ep, nil
		}
		if ctx.Err() != nil || !connectFailure(err) {
			return nil, ep, err
		}
		if i+1 < len(eps) {
			p.log.LogAttrs(ctx, slog.LevelInfo, "endpoint unreachable, trying the next fallback", slog.String("x-request-id", id),
				slog.String("endpoint", ep), slog.String("fallback", eps[i+1]), slog.String("error", err.Error()))
		}
	}
	return nil, eps[len(eps)-1], err
}

// outbound builds the request to endpoint ep: the client's headers without
// hop-by-hop and untrusted ones, the Director's, the model name; the body as
// the Director left it.
func (p *Proxy) outbound(ctx context.Context, r *http.Request, x *requestcontrol.Exchange, ep, id string) (*http.Request, error) {
	out, err := http.NewRequestWithContext(ctx, r.Method, p.Scheme+"://"+ep+r.URL.RequestURI(), bytes.NewReader(x.Body))
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(r.Header)+len(x.Headers)+2)
	for k, vs := range r.Header {
		h[k] = vs
	}
	removeHopHeaders(h)
	for _, u := range requestcontrol.UntrustedHeaders {
		h.Del(u)
	}
	for k, v := range x.Headers {
		h.Set(k, v)
	}
	h.Set(HeaderModelName, x.Request.TargetModel)
	h.Set("X-Request-Id", id)
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := h.Get("X-Forwarded-For"); prior != "" {
			ip = prior + ", " + ip
		}
		h.Set("X-Forwarded-For", ip)
	}
	h.Del("Content-Length") // out.ContentLength is the body's
	out.Header = h
	out.ContentLength = int64(len(x.Body))
	return out, nil
}

// respond copies the upstream response to the client through the Exchange,
// flushing a stream chunk by chunk. It returns the error that ended it early
// (nil when the response completed).
func (p *Proxy) respond(w http.ResponseWriter, resp *http.Response, x *requestcontrol.Exchange, served string, idle *time.Timer, rec *outcome) error {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	removeHopHeaders(h)
	x.ResponseHeaders(served, resp.StatusCode, h)
	rec.Status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	ct := h.Get("Content-Type")
	stream := strings.Contains(ct, "event-stream") || strings.Contains(ct, "ndjson")
	rc := http.NewResponseController(w)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		idle.Reset(p.StreamIdleTimeout)
		end := err == io.EOF
		if n > 0 || end {
			if out := x.ResponseBody(buf[:n], end); len(out) > 0 {
				if _, werr := w.Write(out); werr != nil {
					return werr
				}
				rec.ResponseBytes += int64(len(out))
				if stream {
					if ferr := rc.Flush(); ferr != nil {
						return ferr
					}
				}
			}
		}
		if end {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// reject answers a rejection: its status, its reason header, and an
// OpenAI-style error body.
func (p *Proxy) reject(w http.ResponseWriter, rec *outcome, rej *requestcontrol.Rejection) {
	rec.Status, rec.Reason = rej.Status, rej.Reason
	for k, v := range rej.Headers() {
		w.Header().Set(k, v)
	}
	msg := rej.Error()
	if rej.Err != nil {
		msg = rej.Err.Error()
	}
	writeError(w, rej.Status, msg)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": strings.ReplaceAll(http.StatusText(status), " ", ""), "code": status}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// connectFailure reports whether err means the endpoint gave no answer at
// all: the connection could not be made, was refused, or was reset or
// closed before a response (a pooled connection to a server that went
// away). The request then goes to the next fallback: an engine that died
// before answering computed nothing worth keeping.
func connectFailure(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// hopHeaders are the hop-by-hop headers of RFC 9110 §7.6.1.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h["Connection"] {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}
