package httpproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins/std"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

// cannedTransport answers every request with the same JSON completion,
// without a network: the benchmark measures the proxy's own work.
type cannedTransport struct{ body []byte }

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: r}, nil
}

// BenchmarkServeHTTP is the proxy's cost per request, network aside: an
// 8 KB chat body through the whole pipeline (default configuration, 8
// endpoints, 64 tenants' prompts in turn) and a JSON response with usage
// back to the client.
func BenchmarkServeHTTP(b *testing.B) {
	rt, err := config.Build(context.Background(), nil, std.Registry(), config.Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	now := time.Now()
	eps := make([]*scheduling.Endpoint, 8)
	for i := range eps {
		eps[i] = datalayer.New(fmt.Sprintf("ep-%d", i), fmt.Sprintf("10.0.0.%d", i), 8000, nil).WithMetrics(datalayer.Metrics{
			Waiting: (i * 7) % 33, Running: (i * 13) % 65, KVUsage: float64((i*37)%96) / 100, UpdateTime: now.Add(time.Hour)})
	}
	rt.Director.Pool = requestcontrol.StaticPool(eps)
	p := &Proxy{Director: rt.Director, Transport: cannedTransport{[]byte(
		`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2000,"completion_tokens":1}}`)}}
	bodies := make([][]byte, 64)
	for t := range bodies {
		system := strings.Repeat(fmt.Sprintf("tenant %d system prompt words ", t), 300)[:7900]
		bodies[t] = []byte(fmt.Sprintf(`{"model":"m","max_tokens":16,"messages":[{"role":"system","content":%q},{"role":"user","content":"question"}]}`, system))
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(bodies[0])))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(bodies[i%64]))
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
