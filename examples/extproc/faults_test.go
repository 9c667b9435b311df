package extproc_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/eppkit/eppkit/examples/extproc"
	"github.com/eppkit/eppkit/examples/extproc/envoytest"
	"github.com/eppkit/eppkit/examples/fakeserver"
)

// TestEnvoyClosesEarly resets streams at every point of the exchange: the
// requests are released and no stream or goroutine is left (TestMain
// checks goroutines).
func TestEnvoyClosesEarly(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	body := chatBody("fake-model", strings.Repeat("word ", 1000))

	// Mid request body: the pipeline never runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ext := extprocv3.NewExternalProcessorClient(e.client.Conn())
	ps, err := ext.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = ps.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/v1/chat/completions")}}}}}})
	_ = ps.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: body[:100]}}})
	e.waitFor("the stream to open", func() bool { return e.srv.Streams() == 1 })
	cancel()
	e.settled()

	// After the pick, before any response: a reset, then a clean close.
	for _, abort := range []bool{true, false} {
		st := start(t, e, chatReq(body))
		if e.inFlight() != 1 {
			t.Errorf("in flight %d after the pick", e.inFlight())
		}
		if abort {
			st.Abort()
		} else if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		e.settled()
	}

	// Mid response stream.
	st := start(t, e, chatReq(body))
	if _, err := st.ResponseHeaders(&envoytest.Response{Status: 200, Chunks: [][]byte{nil}, Headers: envoytest.H("content-type", "text/event-stream")}); err != nil {
		t.Fatal(err)
	}
	if err := st.SendResponseChunk([]byte("data: {\"model\":\"fake-model\"}\n\n"), false); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := st.NextResponseChunk(); err != nil {
		t.Fatal(err)
	}
	st.Abort()
	e.settled()
	if n := e.rec.wait(t, 4); n.Status != 200 {
		t.Errorf("metrics of the aborted stream %+v", n)
	}
}

// TestProtocolViolations: messages out of order end the stream with a
// clear status and release nothing twice.
func TestProtocolViolations(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	ext := extprocv3.NewExternalProcessorClient(e.client.Conn())
	for _, c := range []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
		code codes.Code
		msg  string
	}{
		{"response before request", []*extprocv3.ProcessingRequest{{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{}}}},
			codes.FailedPrecondition, "before the request was decided"},
		{"headers twice", []*extprocv3.ProcessingRequest{
			{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}},
			{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}}},
			codes.InvalidArgument, "request headers sent twice"},
		{"empty message", []*extprocv3.ProcessingRequest{{}}, codes.InvalidArgument, "unexpected message"},
		{"body before headers", []*extprocv3.ProcessingRequest{{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("{}")}}}},
			codes.InvalidArgument, "before the request headers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ps, err := ext.Process(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range c.msgs {
				_ = ps.Send(m)
			}
			_, err = ps.Recv()
			if status.Code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got %v, want %v %q", err, c.code, c.msg)
			}
		})
	}
	e.settled()
}

// TestHealthAndDrain: health is SERVING; when Serve's context ends it turns
// NOT_SERVING, an open stream may still finish, and Serve returns.
func TestHealthAndDrain(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}})
	hc := healthpb.NewHealthClient(e.client.Conn())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", resp, err)
	}
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch %v %v", m, err)
	}
	st := start(t, e, chatReq(chatBody("fake-model", "in flight while draining")))
	e.stop() // Serve's context ends
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch while draining %v %v", m, err)
	}
	a, err := st.Respond(&envoytest.Response{Status: 200, Headers: envoytest.H("content-type", "application/json"), Chunks: [][]byte{[]byte(`{"model":"fake-model"}`)}})
	if err != nil || string(a.Body) != `{"model":"fake-model"}` {
		t.Fatalf("the open stream could not finish: %v %v", a, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-e.served:
		e.served <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after draining")
	}
}

// TestDrainTimeout: a stream that does not finish is cut after the drain
// timeout.
func TestDrainTimeout(t *testing.T) {
	e := newEnv(t, envConfig{fake: []fakeserver.Config{{}}, server: func(s *extproc.Server) { s.DrainTimeout = 100 * time.Millisecond }})
	st := start(t, e, chatReq(chatBody("fake-model", "never finishes")))
	start := time.Now()
	e.stop()
	err := <-e.served
	e.served <- err
	if time.Since(start) > 3*time.Second {
		t.Errorf("drain took %v", time.Since(start))
	}
	st.Abort()
	e.settled()
}

// TestServeListenerError: Serve returns the listener's error.
func TestServeListenerError(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()
	s := &extproc.Server{}
	if err := s.Serve(context.Background(), lis, grpc.MaxRecvMsgSize(4<<20)); err == nil {
		t.Error("Serve on a closed listener returned nil")
	}
}
