package metrics_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/metrics"
	"github.com/eppkit/eppkit/plugins"
)

// source builds a metrics-data-source from JSON parameters, initialised.
func source(t testing.TB, params string) *metrics.Source {
	t.Helper()
	reg := plugins.NewRegistry()
	plugins.Register[*metrics.Source](reg, "metrics-data-source")
	p, err := reg.Build("metrics-data-source", "metrics", []byte(params))
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*metrics.Source)
	if err := s.Init(t.Context(), plugins.Deps{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// target returns the discovery target of a test server, labelled with engine.
func target(t testing.TB, name, url, engine string) datalayer.Target {
	t.Helper()
	hostPort := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	labels := map[string]string{}
	if engine != "" {
		labels[metrics.EngineLabel] = engine
	}
	return datalayer.Target{Name: name, Address: host, Port: p, Labels: labels}
}

func serve(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func serveText(t testing.TB, text []byte) *httptest.Server {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(text)
	})
}

// dataLayer starts a runtime scraping ts with src and a core extractor.
func dataLayer(t *testing.T, src *metrics.Source, ts ...datalayer.Target) *datalayer.Runtime {
	t.Helper()
	x := extractor(t, "")
	if err := x.Init(t.Context(), plugins.Deps{}); err != nil { // the wall clock
		t.Fatal(err)
	}
	rt, err := datalayer.NewRuntime(datalayer.Config{
		Discovery: datalayer.SourceFunc(func(ctx context.Context, update func([]datalayer.Target)) error {
			update(ts)
			<-ctx.Done()
			return nil
		}),
		Sources: []datalayer.DataSourceConfig{{Name: "metrics", Source: src, Extractors: []datalayer.NamedExtractor{{Name: "core", Extractor: x}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func get(rt *datalayer.Runtime, name string) *datalayer.Metrics {
	e, _ := rt.Store().Get(name)
	if e == nil {
		return &datalayer.Metrics{}
	}
	return &e.Metrics
}

// checkGoroutines fails the test if goroutines it started outlive it.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines left (had %d):\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestScrapeEveryEngine: recorded-style dumps of each engine served over
// HTTP on 127.0.0.1, scraped and extracted by engine label.
func TestScrapeEveryEngine(t *testing.T) {
	checkGoroutines(t)
	cases := []struct {
		name, file, engine string
		waiting, running   int
		kv                 float64
		blockSize, blocks  int
	}{
		{"vllm", "vllm.prom", "", 7, 23, 0.6218371204536327, 16, 71372},
		{"vllm-v0", "vllm-v0.prom", "vllm", 0, 4, 0.125, 32, 27910},
		{"sglang", "sglang.prom", "sglang", 3, 17, 0.25, 1, 412930},
		{"trtllm", "trtllm-serve.prom", "trtllm-serve", 2, 9, 0.4375, 32, 19958},
		{"triton", "triton-tensorrt-llm.prom", "triton-tensorrt-llm", 2, 6, 0.3125, 64, 5920},
	}
	var ts []datalayer.Target
	for _, c := range cases {
		ts = append(ts, target(t, c.name, serveText(t, readFile(t, c.file)).URL, c.engine))
	}
	src := source(t, `{"interval": "10ms"}`)
	rt := dataLayer(t, src, ts...)
	for _, c := range cases {
		eventually(t, 5*time.Second, c.name+" scraped", func() bool { return get(rt, c.name).Usable() })
		m := get(rt, c.name)
		if m.Waiting != c.waiting || m.Running != c.running || m.KVUsage != c.kv || m.BlockSize != c.blockSize || m.GPUBlocks != c.blocks {
			t.Errorf("%s: %+v", c.name, m)
		}
	}
	if m := get(rt, "vllm"); len(m.LoRA.Active) != 2 || m.LoRA.Max != 4 {
		t.Errorf("vllm LoRA %+v", m.LoRA)
	}
	// The source parses only what the extractor reads.
	names := src.Filter().Names()
	if len(names) == 0 || !contains(names, "vllm:num_requests_waiting") || contains(names, "vllm:time_to_first_token_seconds") {
		t.Errorf("filter %v", names)
	}
	if st := rt.Stats()[0]; st.Failures != 0 || st.Collections < uint64(len(cases)) {
		t.Errorf("stats %+v", st)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestScrapeBadEndpoints: each bad endpoint's metrics become unusable and
// are counted; the good endpoint keeps being scraped.
func TestScrapeBadEndpoints(t *testing.T) {
	checkGoroutines(t)
	good := readFile(t, "vllm.prom")
	replace := func(old, new string) []byte { return []byte(strings.Replace(string(good), old, new, 1)) }
	var hugeWritten atomic.Int64
	refused := func() string { // a port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := "http://" + l.Addr().String()
		l.Close()
		return addr
	}()
	bad := map[string]struct {
		url, want string
	}{
		"malformed": {serveText(t, replace("vllm:num_requests_waiting{", "vllm:num_requests_waiting{{")).URL, "malformed exposition"},
		"nan":       {serveText(t, replace("} 0.6218371204536327", "} NaN")).URL, "not a finite number"},
		"negative":  {serveText(t, replace("} 7.0", "} -7.0")).URL, "negative"},
		"missing":   {serveText(t, replace("vllm:num_requests_running{", "vllm:num_requests_runnin{")).URL, "vllm:num_requests_running: missing"},
		"duplicate": {serveText(t, replace("vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 7.0\n", "vllm:num_requests_waiting{engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 7.0\nvllm:num_requests_waiting{model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine=\"0\"} 8.0\n")).URL, "duplicate series"},
		"html":      {serveText(t, []byte("<html><body>upstream connect error</body></html>")).URL, "malformed exposition"},
		"status":    {serve(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "loading", http.StatusServiceUnavailable) }).URL, "503"},
		"refused":   {refused, "connection refused"},
		"slow": {serve(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}).URL, "no answer within 1s"},
		"huge": {serve(t, func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat("x 1\n", 1<<14))
			n := 0
			defer func() { // the most one request got out before the client hung up
				for m := hugeWritten.Load(); int64(n) > m && !hugeWritten.CompareAndSwap(m, int64(n)); m = hugeWritten.Load() {
				}
			}()
			for ; n < 1<<30; n += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}).URL, "response body too large"},
	}
	ts := []datalayer.Target{target(t, "good", serveText(t, good).URL, "")}
	for name, b := range bad {
		ts = append(ts, target(t, name, b.url, ""))
	}
	src := source(t, `{"interval": "20ms", "timeout": "1s", "maxBytes": 1048576}`)
	rt := dataLayer(t, src, ts...)
	for name, b := range bad {
		eventually(t, 10*time.Second, name+" failed", func() bool { return get(rt, name).LastError != "" })
		m := get(rt, name)
		if m.Usable() || !strings.Contains(m.LastError, b.want) {
			t.Errorf("%s: usable %v, error %q, want %q", name, m.Usable(), m.LastError, b.want)
		}
	}
	first := get(rt, "good").UpdateTime
	eventually(t, 5*time.Second, "good endpoint still scraped", func() bool {
		m := get(rt, "good")
		return m.Usable() && m.UpdateTime.After(first)
	})
	if st := rt.Stats()[0]; st.Failures < uint64(len(bad)) {
		t.Errorf("stats %+v", st)
	}
	// What a request got out is the 1 MiB read plus what the socket buffers
	// hold: far from 1 GB.
	if n := hugeWritten.Load(); n > 64<<20 {
		t.Errorf("the 1 GB body was read far past the limit: the server wrote %d MB in one response", n>>20)
	}
}

// TestScrapeStaleKeepsValues: an endpoint that stops answering keeps its
// last values, stale, and recovers.
func TestScrapeStaleKeepsValues(t *testing.T) {
	checkGoroutines(t)
	var down atomic.Bool
	text := readFile(t, "vllm.prom")
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Write(text)
	})
	rt := dataLayer(t, source(t, `{"interval": "10ms"}`), target(t, "e", srv.URL, ""))
	eventually(t, 5*time.Second, "scraped", func() bool { return get(rt, "e").Usable() })
	down.Store(true)
	eventually(t, 5*time.Second, "stale", func() bool { return get(rt, "e").Stale })
	m := get(rt, "e")
	if m.Waiting != 7 || m.Usable() || m.Failures < 1 || m.Age(time.Now()) <= 0 {
		t.Errorf("stale metrics %+v", m)
	}
	down.Store(false)
	eventually(t, 5*time.Second, "recovered", func() bool { return get(rt, "e").Usable() })
	if m := get(rt, "e"); m.Failures != 0 || m.LastError != "" {
		t.Errorf("recovered metrics %+v", m)
	}
}

func TestSourceURL(t *testing.T) {
	s := source(t, `{"scheme": "https", "path": "/custom/metrics", "port": 9090}`)
	if got := s.URL(datalayer.New("e", "fd00::1", 8000, nil)); got != "https://[fd00::1]:9090/custom/metrics" {
		t.Errorf("url %s", got)
	}
	s = source(t, "")
	if got := s.URL(datalayer.New("e", "10.0.0.1", 8000, nil)); got != "http://10.0.0.1:8000/metrics" {
		t.Errorf("url %s", got)
	}
	reg := plugins.NewRegistry()
	plugins.Register[*metrics.Source](reg, "metrics-data-source")
	for _, params := range []string{`{"scheme": "ftp"}`, `{"path": "metrics"}`, `{"port": 70000}`, `{"interval": "0s"}`, `{"workers": 0}`, `{"maxBytes": 0}`, `{"clientCertPath": "c.pem"}`} {
		if _, err := reg.Build("metrics-data-source", "m", []byte(params)); err == nil {
			t.Errorf("%s accepted", params)
		}
	}
}

// TestScrapeTLS: https with the default (insecureSkipVerify), with a CA
// bundle, and with a client certificate the server requires.
func TestScrapeTLS(t *testing.T) {
	checkGoroutines(t)
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil, true)
	newCert(t, dir, "server", ca, caKey, false)
	newCert(t, dir, "client", ca, caKey, false)
	text := readFile(t, "vllm.prom")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(text) })

	quiet := log.New(io.Discard, "", 0) // the handshakes refused on purpose
	plain := httptest.NewUnstartedServer(h)
	plain.Config.ErrorLog = quiet
	plain.StartTLS() // its own self-signed certificate
	t.Cleanup(plain.Close)
	mtls := httptest.NewUnstartedServer(h)
	mtls.Config.ErrorLog = quiet
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	mtls.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	mtls.StartTLS()
	t.Cleanup(mtls.Close)

	scrape := func(params, url string) (datalayer.Metrics, error) {
		src := source(t, params)
		tg := target(t, "e", url, "")
		e := datalayer.New("e", tg.Address, tg.Port, nil)
		data, err := src.Collect(t.Context(), e)
		if err != nil {
			return datalayer.Metrics{}, err
		}
		x := extractor(t, "")
		err = x.Extract(data, e)
		return e.Metrics, err
	}
	if m, err := scrape(`{"scheme": "https"}`, plain.URL); err != nil || m.Waiting != 7 {
		t.Errorf("insecureSkipVerify by default: %v %+v", err, m)
	}
	if _, err := scrape(`{"scheme": "https", "insecureSkipVerify": false}`, plain.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("verification on: %v", err)
	}
	caParams := `{"scheme": "https", "insecureSkipVerify": false, "caCertPath": "` + filepath.Join(dir, "ca.pem") + `"`
	if _, err := scrape(caParams+`}`, mtls.URL); err == nil {
		t.Error("mTLS server accepted a client without a certificate")
	}
	clientParams := caParams + `, "clientCertPath": "` + filepath.Join(dir, "client.pem") + `", "clientKeyPath": "` + filepath.Join(dir, "client-key.pem") + `"}`
	if m, err := scrape(clientParams, mtls.URL); err != nil || m.Waiting != 7 {
		t.Errorf("mTLS with CA and client certificate: %v %+v", err, m)
	}
}

// newCert writes NAME.pem and NAME-key.pem in dir: a CA when isCA, else a
// certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	return cert, key
}

// TestSourceForgetsRemovedEndpoints: the per-endpoint parser goes when the
// endpoint leaves (the source is an EndpointListener).
func TestSourceForgetsRemovedEndpoints(t *testing.T) {
	srv := serveText(t, readFile(t, "vllm.prom"))
	src := source(t, "")
	tg := target(t, "e", srv.URL, "")
	e := datalayer.New("e", tg.Address, tg.Port, nil)
	for range 2 {
		data, err := src.Collect(t.Context(), e)
		if err != nil || data.(metrics.Families)["vllm:num_requests_waiting"] == nil {
			t.Fatal(data, err)
		}
	}
	src.EndpointRemoved(e)
	if data, err := src.Collect(t.Context(), e); err != nil || data.(metrics.Families)["vllm:num_requests_waiting"] == nil {
		t.Fatal(data, err)
	}
}
