package extproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/eppkit/eppkit/requestcontrol"
)

// Metadata namespaces and keys of the protocol with the gateway.
const (
	// MetadataNamespace holds the pick in the dynamic metadata the
	// processor returns, and the served endpoint in the metadata Envoy
	// sends on the response path.
	MetadataNamespace = "envoy.lb"
	// SubsetHintNamespace and SubsetHintKey hold the gateway's endpoint
	// subset hint: a list of "ip:port".
	SubsetHintNamespace = "envoy.lb.subset_hint"
	SubsetHintKey       = "x-gateway-destination-endpoint-subset"
	// ServedKey names the endpoint that actually served, when the gateway
	// reports it (Server.ServedEndpointMetadata).
	ServedKey = "x-gateway-destination-endpoint-served"
	// MaxChunkSize bounds the body chunks the processor sends back.
	MaxChunkSize = 64 << 10
)

// Server is the ext-proc adapter: an envoy.service.ext_proc.v3
// ExternalProcessor that runs the request pipeline for each HTTP request,
// one Process stream per request, with bodies in FULL_DUPLEX_STREAMED mode
// both ways (see the package documentation for the protocol).
//
// Set the fields before serving; a Server is safe for concurrent use.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer

	Director *requestcontrol.Director
	// Metrics, when set, receives each request's outcome.
	Metrics requestcontrol.Metrics
	// Logger receives stream failures; nil discards.
	Logger *slog.Logger
	// ServedEndpointMetadata makes the response path read the endpoint that
	// served from the envoy.lb metadata key
	// x-gateway-destination-endpoint-served, so response hooks (and the
	// prefix index) credit it rather than the primary pick.
	ServedEndpointMetadata bool
	// DrainTimeout bounds how long Serve waits for open streams when it
	// stops (default 30s).
	DrainTimeout time.Duration

	streams atomic.Int64
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

func (s *Server) log() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Streams returns the number of Process streams open now.
func (s *Server) Streams() int64 { return s.streams.Load() }

// Register registers the processor and a health service reporting SERVING
// for "" and the processor's service name; the health server is returned to
// mark the processor NOT_SERVING while draining.
func (s *Server) Register(g *grpc.Server) *health.Server {
	extprocv3.RegisterExternalProcessorServer(g, s)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	return h
}

// Serve serves the processor and its health service on lis until ctx is
// done, then drains: health turns NOT_SERVING, new streams are refused, and
// open ones get DrainTimeout to finish before they are cut.
func (s *Server) Serve(ctx context.Context, lis net.Listener, opts ...grpc.ServerOption) error {
	g := grpc.NewServer(opts...)
	h := s.Register(g)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	h.Shutdown()
	drain := s.DrainTimeout
	if drain <= 0 {
		drain = 30 * time.Second
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(drain):
		g.Stop()
		<-stopped
	}
	return <-errc
}

// errEarlyClose is why an exchange ends when the gateway closes the stream
// before the response ended.
var errEarlyClose = errors.New("extproc: the gateway closed the stream before the response ended")

// Process handles one HTTP request.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	s.streams.Add(1)
	defer s.streams.Add(-1)
	p := &processor{s: s, stream: stream, ctx: stream.Context(), start: time.Now()}
	err := p.run()
	p.finish(err)
	if err != nil && !errors.Is(err, io.EOF) {
		if c := status.Code(err); c == codes.Canceled || c == codes.DeadlineExceeded {
			return nil // the gateway went away: nothing to answer
		}
		s.log().LogAttrs(p.ctx, slog.LevelWarn, "ext-proc stream failed", slog.String("x-request-id", p.id), slog.String("error", err.Error()))
		return err
	}
	return nil
}

// processor is the state of one Process stream.
type processor struct {
	s      *Server
	stream extprocv3.ExternalProcessor_ProcessServer
	ctx    context.Context
	start  time.Time

	id       string
	path     string
	headers  map[string]string
	subset   []string
	body     []byte
	decided  bool
	x        *requestcontrol.Exchange
	rec      requestcontrol.RequestMetrics
	complete bool // the response ended (or an immediate response was sent)
}

// run reads the stream until the request is answered and its response has
// passed, the gateway closes it, or a send fails.
func (p *processor) run() error {
	for {
		req, err := p.stream.Recv()
		if err != nil {
			return err
		}
		switch r := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			err = p.requestHeaders(req, r.RequestHeaders)
		case *extprocv3.ProcessingRequest_RequestBody:
			err = p.requestBody(r.RequestBody)
		case *extprocv3.ProcessingRequest_RequestTrailers:
			err = p.requestTrailers()
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			err = p.responseHeaders(req, r.ResponseHeaders)
		case *extprocv3.ProcessingRequest_ResponseBody:
			err = p.responseBody(r.ResponseBody.GetBody(), r.ResponseBody.GetEndOfStream())
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			err = p.responseTrailers()
		default:
			err = status.Errorf(codes.InvalidArgument, "extproc: unexpected message %T", req.Request)
		}
		if err != nil {
			return err
		}
		if p.complete && p.x == nil {
			return nil // an immediate response ends the exchange
		}
	}
}

// finish closes the exchange and reports the request. err is how the
// stream ended (io.EOF: the gateway closed it).
func (p *processor) finish(err error) {
	if p.x != nil {
		var closeErr error
		if !p.complete {
			closeErr = errEarlyClose
			if err != nil && !errors.Is(err, io.EOF) {
				closeErr = fmt.Errorf("%w: %w", errEarlyClose, err)
			}
		}
		p.x.Close(closeErr)
	}
	if m := p.s.Metrics; m != nil && p.headers != nil {
		rec := p.rec.Outcome(p.x)
		rec.Duration = time.Since(p.start)
		m.Request(rec)
	}
}

func (p *processor) requestHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	if p.headers != nil {
		return status.Error(codes.InvalidArgument, "extproc: request headers sent twice")
	}
	p.headers = headerMap(h.GetHeaders())
	p.id = p.headers["x-request-id"]
	p.path = p.headers[":path"]
	p.subset = subsetHint(req.GetMetadataContext())
	if h.GetEndOfStream() {
		return p.decide(false, false)
	}
	if n, err := strconv.ParseInt(p.headers["content-length"], 10, 64); err == nil && n > 0 && n <= p.limit() {
		p.body = make([]byte, 0, n)
	}
	return nil
}

func (p *processor) requestBody(b *extprocv3.HttpBody) error {
	switch {
	case p.headers == nil:
		return status.Error(codes.InvalidArgument, "extproc: request body before the request headers")
	case p.decided:
		return status.Error(codes.InvalidArgument, "extproc: request body after the end of the request")
	}
	p.body = append(p.body, b.GetBody()...)
	if int64(len(p.body)) > p.limit() {
		// ReadBody refuses it with the Director's 413; nothing more is read.
		_, err := p.s.Director.ReadBody(bytes.NewReader(p.body))
		p.decided = true
		return p.reject(requestcontrol.Reject(err))
	}
	if b.GetEndOfStream() {
		return p.decide(true, true)
	}
	return nil
}

func (p *processor) limit() int64 {
	if l := p.s.Director.Limits.MaxRequestBytes; l > 0 {
		return l
	}
	return requestcontrol.DefaultMaxRequestBytes
}

// requestTrailers ends the request body (trailers follow the last chunk).
func (p *processor) requestTrailers() error {
	if p.headers == nil {
		return status.Error(codes.InvalidArgument, "extproc: request trailers before the request headers")
	}
	if !p.decided {
		if err := p.decide(true, false); err != nil || p.complete {
			return err
		}
	}
	return p.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{}}})
}

// decide runs the pipeline on the complete request and answers: an
// immediate response for a rejection; otherwise the request headers
// response with the pick, then (hasBody) the body as streamed chunks, the
// last marked end of stream when eos.
func (p *processor) decide(hasBody, eos bool) error {
	p.decided = true
	p.rec.RequestBytes = int64(len(p.body))
	x, err := p.s.Director.HandleRequest(p.ctx, &requestcontrol.Inbound{
		ID: p.id, Path: p.path, Headers: maps.Clone(p.headers), Body: p.body, Subset: p.subset,
	})
	if err != nil {
		return p.reject(requestcontrol.Reject(err))
	}
	p.x = x
	dest := x.Decision.Header()
	mut := &extprocv3.HeaderMutation{}
	for _, k := range sortedKeys(x.Headers) {
		mut.SetHeaders = append(mut.SetHeaders, setHeader(k, x.Headers[k]))
	}
	if hasBody {
		if _, set := x.Headers["content-length"]; !set {
			mut.SetHeaders = append(mut.SetHeaders, setHeader("content-length", strconv.Itoa(len(x.Body))))
		}
	}
	for _, h := range requestcontrol.UntrustedHeaders {
		if _, sent := p.headers[h]; sent {
			if _, set := x.Headers[h]; !set {
				mut.RemoveHeaders = append(mut.RemoveHeaders, h)
			}
		}
	}
	md, err := structpb.NewStruct(map[string]any{MetadataNamespace: map[string]any{requestcontrol.HeaderDestination: dest}})
	if err != nil {
		return err
	}
	if err := p.send(&extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: mut},
		}},
		DynamicMetadata: md,
	}); err != nil {
		return err
	}
	if !hasBody {
		return nil
	}
	return p.sendBody(true, x.Body, eos)
}

// reject answers with an immediate response carrying the rejection's
// status, reason header and an OpenAI-style error body.
func (p *processor) reject(rej *requestcontrol.Rejection) error {
	p.rec.Status, p.rec.Reason = rej.Status, rej.Reason
	p.complete = true
	msg := rej.Error()
	if rej.Err != nil {
		msg = rej.Err.Error()
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": strings.ReplaceAll(http.StatusText(rej.Status), " ", ""), "code": rej.Status}})
	mut := &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setHeader("content-type", "application/json")}}
	for _, k := range sortedKeys(rej.Headers()) {
		mut.SetHeaders = append(mut.SetHeaders, setHeader(k, rej.Headers()[k]))
	}
	details := "eppkit_rejected"
	if rej.Reason != "" {
		details = "eppkit_" + strings.ReplaceAll(rej.Reason, "-", "_")
	}
	return p.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(rej.Status)},
			Headers: mut,
			Body:    body,
			Details: details,
		}}})
}

func (p *processor) responseHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) error {
	if p.x == nil {
		return status.Error(codes.FailedPrecondition, "extproc: response headers before the request was decided")
	}
	in := headerMap(h.GetHeaders())
	code, _ := strconv.Atoi(in[":status"])
	p.rec.Status = code
	hdr := make(http.Header, len(in))
	for k, v := range in {
		if !strings.HasPrefix(k, ":") {
			hdr.Set(k, v)
		}
	}
	before := hdr.Clone()
	served := ""
	if p.s.ServedEndpointMetadata {
		served = servedEndpoint(req.GetMetadataContext())
	}
	p.x.ResponseHeaders(served, code, hdr)
	mut := &extprocv3.HeaderMutation{}
	for _, k := range sortedKeys(hdr) {
		if v := strings.Join(hdr[k], ","); strings.Join(before[k], ",") != v {
			mut.SetHeaders = append(mut.SetHeaders, setHeader(strings.ToLower(k), v))
		}
	}
	for _, k := range sortedKeys(before) {
		if _, kept := hdr[k]; !kept {
			mut.RemoveHeaders = append(mut.RemoveHeaders, strings.ToLower(k))
		}
	}
	if err := p.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut}},
	}}); err != nil {
		return err
	}
	if h.GetEndOfStream() {
		p.x.ResponseBody(nil, true)
		p.complete = true
	}
	return nil
}

func (p *processor) responseBody(chunk []byte, eos bool) error {
	if p.x == nil {
		return status.Error(codes.FailedPrecondition, "extproc: response body before the request was decided")
	}
	out := p.x.ResponseBody(chunk, eos)
	if eos {
		p.complete = true
	}
	if len(out) == 0 && !eos {
		return nil // held back: a non-streaming body, or a partial line being rewritten
	}
	return p.sendBody(false, out, eos)
}

// responseTrailers ends the response body (trailers follow the last chunk).
func (p *processor) responseTrailers() error {
	if p.x != nil && !p.complete {
		p.complete = true
		if out := p.x.ResponseBody(nil, true); len(out) > 0 {
			if err := p.sendBody(false, out, false); err != nil {
				return err
			}
		}
	}
	return p.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{}}})
}

// sendBody sends body as StreamedBodyResponse chunks of at most
// MaxChunkSize, on the request or the response path; the last is marked
// end of stream when eos. An empty body is one empty chunk.
func (p *processor) sendBody(request bool, body []byte, eos bool) error {
	for {
		n := min(len(body), MaxChunkSize)
		last := n == len(body)
		br := &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
				Body: body[:n], EndOfStream: last && eos}}}}}
		resp := &extprocv3.ProcessingResponse{}
		if request {
			resp.Response = &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}
		} else {
			resp.Response = &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}
			p.rec.ResponseBytes += int64(n)
		}
		if err := p.send(resp); err != nil {
			return err
		}
		if last {
			return nil
		}
		body = body[n:]
	}
}

func (p *processor) send(r *extprocv3.ProcessingResponse) error {
	if err := p.stream.Send(r); err != nil {
		return fmt.Errorf("extproc: send: %w", err)
	}
	return nil
}

// headerMap returns the headers with lower-case names; a value is taken
// from raw_value (what Envoy sends) or value; repeated names are joined
// with commas.
func headerMap(hm *corev3.HeaderMap) map[string]string {
	hs := hm.GetHeaders()
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		k := strings.ToLower(h.GetKey())
		v := string(h.GetRawValue())
		if v == "" {
			v = h.GetValue()
		}
		if prev, ok := m[k]; ok {
			v = prev + "," + v
		}
		m[k] = v
	}
	return m
}

func setHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// subsetHint reads the gateway's endpoint subset hint: a list of strings,
// or a comma-separated string; nil when there is none.
func subsetHint(md *corev3.Metadata) []string {
	ns, ok := md.GetFilterMetadata()[SubsetHintNamespace]
	if !ok {
		return nil
	}
	v, ok := ns.GetFields()[SubsetHintKey]
	if !ok {
		return nil
	}
	out := []string{}
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if s := e.GetStringValue(); s != "" {
				out = append(out, s)
			}
		}
	case *structpb.Value_StringValue:
		for _, s := range strings.Split(k.StringValue, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// servedEndpoint reads the endpoint that served from the response path's
// metadata ("" when absent).
func servedEndpoint(md *corev3.Metadata) string {
	return md.GetFilterMetadata()[MetadataNamespace].GetFields()[ServedKey].GetStringValue()
}

func sortedKeys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }
