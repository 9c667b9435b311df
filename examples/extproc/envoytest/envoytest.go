// Package envoytest speaks Envoy's side of the ext_proc protocol, the way
// Envoy's ext_proc HTTP filter does with request and response bodies in
// FULL_DUPLEX_STREAMED mode, so an ExternalProcessor can be tested (and
// benchmarked) without an Envoy:
//
//   - the request headers (pseudo-headers included, values in raw_value,
//     the protocol configuration attached, end_of_stream when there is no
//     body), then the body chunks and the trailers, all sent without
//     waiting for answers;
//   - then it reads the answers in the order the protocol requires (the
//     request headers response, the streamed body chunks up to
//     end_of_stream, the trailers response; or one immediate response)
//     and fails on anything else;
//   - it applies the header mutation and the streamed body to give what
//     the upstream would receive;
//   - on the response path it sends the response headers, the body chunks
//     (one at a time or all at once) and trailers, and reads the answers
//     back the same way.
//
// Do plays a whole Envoy: the request phase, the HTTP request to the picked
// endpoint (trying the fallbacks when it cannot connect), and the upstream
// response streamed back through the processor chunk by chunk.
package envoytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// Metadata names of the protocol (see the extproc package).
const (
	lbNamespace     = "envoy.lb"
	subsetNamespace = "envoy.lb.subset_hint"
	subsetKey       = "x-gateway-destination-endpoint-subset"
	servedKey       = "x-gateway-destination-endpoint-served"
	destination     = "x-gateway-destination-endpoint"
)

// Client is a connection to an external processor.
type Client struct {
	conn *grpc.ClientConn
	ext  extprocv3.ExternalProcessorClient
}

// Dial connects to the processor at target (host:port), without TLS.
func Dial(target string) (*Client, error) {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, ext: extprocv3.NewExternalProcessorClient(conn)}, nil
}

// Conn returns the gRPC connection (for the health service).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Header is one header field, in order.
type Header struct{ Key, Value string }

// H returns the headers of name, value pairs.
func H(kv ...string) []Header {
	hs := make([]Header, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, Header{Key: kv[i], Value: kv[i+1]})
	}
	return hs
}

// Request is an HTTP request as the gateway received it.
type Request struct {
	Method    string // default POST
	Path      string
	Authority string // default "gateway"
	Headers   []Header
	// Body is the request body; nil means none (the headers end the
	// stream), empty means one empty chunk ends it.
	Body []byte
	// Chunks is the number of chunks the body is sent in (default 1).
	Chunks   int
	Trailers []Header
	// Subset, when non-nil, is sent as the envoy.lb.subset_hint metadata.
	Subset []string
}

// Stream is one Process stream: one HTTP request and its response.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	s      extprocv3.ExternalProcessor_ProcessClient
	msgs   chan *extprocv3.ProcessingResponse
	done   chan struct{}
	errMu  sync.Mutex
	err    error // why the receive loop ended

	// What the processor answered on the request path.
	Immediate       *extprocv3.ImmediateResponse
	HeadersResponse *extprocv3.HeadersResponse
	DynamicMetadata *structpb.Struct
	// Headers are the request headers after the mutation, lower-case.
	Headers map[string]string
	// BodyChunks are the streamed request body chunks as received; Body
	// is their concatenation.
	BodyChunks [][]byte
	Body       []byte
	// TrailersAnswered is set when the request trailers were answered.
	TrailersAnswered bool
}

// Start opens a stream and runs the request path of req: it returns once
// the processor has answered the request completely (or with an immediate
// response).
func (c *Client) Start(ctx context.Context, req *Request) (*Stream, error) {
	ctx, cancel := context.WithCancel(ctx)
	ps, err := c.ext.Process(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &Stream{ctx: ctx, cancel: cancel, s: ps, msgs: make(chan *extprocv3.ProcessingResponse, 64), done: make(chan struct{})}
	go st.receive()
	if err := st.request(req); err != nil {
		st.Abort()
		return nil, err
	}
	return st, nil
}

func (st *Stream) receive() {
	defer close(st.done)
	defer close(st.msgs)
	for {
		m, err := st.s.Recv()
		if err != nil {
			st.errMu.Lock()
			st.err = err
			st.errMu.Unlock()
			return
		}
		select {
		case st.msgs <- m:
		case <-st.ctx.Done():
			return
		}
	}
}

// next returns the next answer, or the error that ended the stream.
func (st *Stream) next() (*extprocv3.ProcessingResponse, error) {
	m, ok := <-st.msgs
	if !ok {
		st.errMu.Lock()
		defer st.errMu.Unlock()
		if st.err == nil {
			return nil, io.EOF
		}
		return nil, st.err
	}
	return m, nil
}

func (st *Stream) request(req *Request) error {
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	authority := req.Authority
	if authority == "" {
		authority = "gateway"
	}
	hs := H(":method", method, ":path", req.Path, ":authority", authority, ":scheme", "http")
	hs = append(hs, req.Headers...)
	if len(req.Body) > 0 && !has(req.Headers, "content-length") {
		hs = append(hs, H("content-length", strconv.Itoa(len(req.Body)))...)
	}
	noBody := req.Body == nil && len(req.Trailers) == 0
	first := &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: headerMap(hs), EndOfStream: noBody}},
		ProtocolConfig: &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
			ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
		},
	}
	if req.Subset != nil {
		vals := make([]any, len(req.Subset))
		for i, s := range req.Subset {
			vals[i] = s
		}
		md, err := structpb.NewStruct(map[string]any{subsetKey: vals})
		if err != nil {
			return err
		}
		first.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{subsetNamespace: md}}
	}
	// Send everything without waiting. io.EOF means the processor ended
	// the stream (an immediate response): stop sending, read its answer.
	msgs := []*extprocv3.ProcessingRequest{first}
	if !noBody {
		chunks := split(req.Body, req.Chunks)
		for i, c := range chunks {
			msgs = append(msgs, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
				RequestBody: &extprocv3.HttpBody{Body: c, EndOfStream: i == len(chunks)-1 && len(req.Trailers) == 0}}})
		}
		if len(req.Trailers) > 0 {
			msgs = append(msgs, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
				RequestTrailers: &extprocv3.HttpTrailers{Trailers: headerMap(req.Trailers)}}})
		}
	}
	for _, m := range msgs {
		if err := st.s.Send(m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
	}
	// The answers, in the protocol's order.
	m, err := st.next()
	if err != nil {
		return fmt.Errorf("envoytest: waiting for the request headers response: %w", err)
	}
	switch r := m.Response.(type) {
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		st.Immediate = r.ImmediateResponse
		return nil
	case *extprocv3.ProcessingResponse_RequestHeaders:
		st.HeadersResponse = r.RequestHeaders
		st.DynamicMetadata = m.DynamicMetadata
	default:
		return fmt.Errorf("envoytest: got %T before the request headers response", m.Response)
	}
	st.Headers = apply(hs, st.HeadersResponse.GetResponse().GetHeaderMutation())
	if noBody {
		return nil
	}
	for {
		m, err := st.next()
		if err != nil {
			return fmt.Errorf("envoytest: waiting for the request body: %w", err)
		}
		switch r := m.Response.(type) {
		case *extprocv3.ProcessingResponse_RequestBody:
			sr := r.RequestBody.GetResponse().GetBodyMutation().GetStreamedResponse()
			if sr == nil {
				return errors.New("envoytest: a request body response without a streamed_response mutation")
			}
			st.BodyChunks = append(st.BodyChunks, sr.GetBody())
			st.Body = append(st.Body, sr.GetBody()...)
			if sr.GetEndOfStream() {
				if len(req.Trailers) > 0 {
					return errors.New("envoytest: end_of_stream on the request body, but trailers follow")
				}
				return nil
			}
		case *extprocv3.ProcessingResponse_RequestTrailers:
			if len(req.Trailers) == 0 {
				return errors.New("envoytest: a trailers response without trailers")
			}
			st.TrailersAnswered = true
			return nil
		default:
			return fmt.Errorf("envoytest: got %T while reading the request body", m.Response)
		}
	}
}

// Destinations returns the picked endpoints from the destination header.
func (st *Stream) Destinations() []string {
	v := st.Headers[destination]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Response is an upstream response as the gateway received it.
type Response struct {
	Status   int
	Headers  []Header
	Chunks   [][]byte
	Trailers []Header
	// Served, when set, is sent as the envoy.lb metadata
	// x-gateway-destination-endpoint-served.
	Served string
}

// Answer is what the processor made of a response: what the client gets.
type Answer struct {
	HeadersResponse *extprocv3.HeadersResponse
	Status          int
	// Headers are the response headers after the mutation, lower-case.
	Headers map[string]string
	// Chunks are the streamed body chunks as received; Body their
	// concatenation.
	Chunks           [][]byte
	Body             []byte
	TrailersAnswered bool
}

// ResponseHeaders sends the response headers (with end_of_stream when
// there is no body and no trailers) and reads their answer.
func (st *Stream) ResponseHeaders(resp *Response) (*Answer, error) {
	hs := append(H(":status", strconv.Itoa(resp.Status)), resp.Headers...)
	m := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
		Headers: headerMap(hs), EndOfStream: len(resp.Chunks) == 0 && len(resp.Trailers) == 0}}}
	if resp.Served != "" {
		md, err := structpb.NewStruct(map[string]any{servedKey: resp.Served})
		if err != nil {
			return nil, err
		}
		m.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{lbNamespace: md}}
	}
	if err := st.s.Send(m); err != nil {
		return nil, err
	}
	r, err := st.next()
	if err != nil {
		return nil, fmt.Errorf("envoytest: waiting for the response headers response: %w", err)
	}
	hr, ok := r.Response.(*extprocv3.ProcessingResponse_ResponseHeaders)
	if !ok {
		return nil, fmt.Errorf("envoytest: got %T for the response headers", r.Response)
	}
	a := &Answer{HeadersResponse: hr.ResponseHeaders, Status: resp.Status,
		Headers: apply(resp.Headers, hr.ResponseHeaders.GetResponse().GetHeaderMutation())}
	return a, nil
}

// SendResponseChunk sends one response body chunk without waiting.
func (st *Stream) SendResponseChunk(b []byte, endOfStream bool) error {
	return st.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: endOfStream}}})
}

// SendResponseTrailers sends the response trailers.
func (st *Stream) SendResponseTrailers(ts []Header) error {
	return st.s.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{Trailers: headerMap(ts)}}})
}

// NextResponseChunk reads the next answer on the response path: a streamed
// body chunk (end: it was the last), or the trailers response (trailers:
// true).
func (st *Stream) NextResponseChunk() (chunk []byte, end, trailers bool, err error) {
	m, err := st.next()
	if err != nil {
		return nil, false, false, fmt.Errorf("envoytest: waiting for the response body: %w", err)
	}
	switch r := m.Response.(type) {
	case *extprocv3.ProcessingResponse_ResponseBody:
		sr := r.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			return nil, false, false, errors.New("envoytest: a response body response without a streamed_response mutation")
		}
		return sr.GetBody(), sr.GetEndOfStream(), false, nil
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return nil, false, true, nil
	}
	return nil, false, false, fmt.Errorf("envoytest: got %T while reading the response body", m.Response)
}

// Respond runs the whole response path: the headers, every chunk sent
// without waiting, the trailers, and reads the answers until the body's
// end_of_stream (or the trailers response).
func (st *Stream) Respond(resp *Response) (*Answer, error) {
	a, err := st.ResponseHeaders(resp)
	if err != nil || len(resp.Chunks) == 0 && len(resp.Trailers) == 0 {
		return a, err
	}
	for i, c := range resp.Chunks {
		if err := st.SendResponseChunk(c, i == len(resp.Chunks)-1 && len(resp.Trailers) == 0); err != nil {
			return nil, err
		}
	}
	if len(resp.Trailers) > 0 {
		if err := st.SendResponseTrailers(resp.Trailers); err != nil {
			return nil, err
		}
	}
	for {
		c, end, trailers, err := st.NextResponseChunk()
		if err != nil {
			return nil, err
		}
		if trailers {
			a.TrailersAnswered = true
			return a, nil
		}
		a.Chunks = append(a.Chunks, c)
		a.Body = append(a.Body, c...)
		if end {
			return a, nil
		}
	}
}

// Close ends the stream as Envoy does after the response: it half-closes
// and waits for the processor to end the stream; it returns the status the
// stream ended with (nil for a clean end).
func (st *Stream) Close() error {
	if err := st.s.CloseSend(); err != nil {
		st.Abort()
		return err
	}
	for {
		if _, err := st.next(); err != nil {
			st.cancel()
			<-st.done
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// Abort resets the stream, as Envoy does when the client goes away.
func (st *Stream) Abort() {
	st.cancel()
	<-st.done
}

// Do plays Envoy for one request: the request path through the processor,
// the HTTP request to the picked endpoint (or, when the connection fails,
// the fallbacks in order) with the mutated headers and body, and the
// upstream response back through the processor, chunk by chunk as it
// arrives. onChunk, when set, sees each processed chunk as the client would.
// An immediate response is returned as the answer.
func (c *Client) Do(ctx context.Context, req *Request, hc *http.Client, onChunk func([]byte)) (*Answer, error) {
	st, err := c.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	defer st.Abort()
	if im := st.Immediate; im != nil {
		return &Answer{Status: int(im.GetStatus().GetCode()), Headers: apply(nil, im.GetHeaders()), Body: im.GetBody()}, st.Close()
	}
	resp, served, err := st.forward(ctx, req, hc)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var hs []Header
	for k, vs := range resp.Header {
		hs = append(hs, Header{Key: strings.ToLower(k), Value: strings.Join(vs, ",")})
	}
	a, err := st.ResponseHeaders(&Response{Status: resp.StatusCode, Headers: hs, Chunks: [][]byte{nil}, Served: served})
	if err != nil {
		return nil, err
	}
	// Read the upstream and the processor at once: each chunk is sent as
	// it arrives, the answers are collected as they come back.
	sendErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			end := errors.Is(err, io.EOF)
			if n > 0 || end {
				if serr := st.SendResponseChunk(bytes.Clone(buf[:n]), end); serr != nil {
					sendErr <- serr
					return
				}
			}
			if err != nil {
				if !end {
					sendErr <- err
				} else {
					sendErr <- nil
				}
				return
			}
		}
	}()
	for {
		chunk, end, _, err := st.NextResponseChunk()
		if err != nil {
			return nil, err
		}
		if onChunk != nil && len(chunk) > 0 {
			onChunk(chunk)
		}
		a.Chunks = append(a.Chunks, chunk)
		a.Body = append(a.Body, chunk...)
		if end {
			break
		}
	}
	if err := <-sendErr; err != nil {
		return nil, err
	}
	return a, st.Close()
}

// forward sends the mutated request to the picked endpoint, then to the
// fallbacks while connections fail.
func (st *Stream) forward(ctx context.Context, req *Request, hc *http.Client) (*http.Response, string, error) {
	eps := st.Destinations()
	if len(eps) == 0 {
		return nil, "", errors.New("envoytest: the processor picked no endpoint")
	}
	var err error
	for _, ep := range eps {
		hr, rerr := http.NewRequestWithContext(ctx, methodOf(req), "http://"+ep+req.Path, bytes.NewReader(st.Body))
		if rerr != nil {
			return nil, ep, rerr
		}
		for k, v := range st.Headers {
			if !strings.HasPrefix(k, ":") && k != "content-length" {
				hr.Header.Set(k, v)
			}
		}
		var resp *http.Response
		if resp, err = hc.Do(hr); err == nil {
			return resp, ep, nil
		}
		// Like Envoy's retry on connect-failure and reset: the next pick.
		var op *net.OpError
		if (!errors.As(err, &op) || op.Op != "dial") && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			return nil, ep, err
		}
	}
	return nil, eps[len(eps)-1], err
}

func methodOf(r *Request) string {
	if r.Method == "" {
		return http.MethodPost
	}
	return r.Method
}

func headerMap(hs []Header) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for _, h := range hs {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: h.Key, RawValue: []byte(h.Value)})
	}
	return m
}

// apply applies a header mutation to hs as Envoy does and returns the
// result with lower-case names.
func apply(hs []Header, mut *extprocv3.HeaderMutation) map[string]string {
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		out[strings.ToLower(h.Key)] = h.Value
	}
	for _, r := range mut.GetRemoveHeaders() {
		delete(out, strings.ToLower(r))
	}
	for _, o := range mut.GetSetHeaders() {
		k := strings.ToLower(o.GetHeader().GetKey())
		v := string(o.GetHeader().GetRawValue())
		if v == "" {
			v = o.GetHeader().GetValue()
		}
		switch o.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			if prev, ok := out[k]; ok {
				v = prev + "," + v
			}
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if _, ok := out[k]; ok {
				continue
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if _, ok := out[k]; !ok {
				continue
			}
		}
		out[k] = v
	}
	return out
}

// split cuts b into n chunks of nearly equal size (at least one).
func split(b []byte, n int) [][]byte {
	if n < 1 {
		n = 1
	}
	n = min(n, max(len(b), 1))
	out := make([][]byte, 0, n)
	for i := range n {
		out = append(out, b[i*len(b)/n:(i+1)*len(b)/n])
	}
	return out
}

func has(hs []Header, key string) bool {
	for _, h := range hs {
		if strings.EqualFold(h.Key, key) {
			return true
		}
	}
	return false
}
