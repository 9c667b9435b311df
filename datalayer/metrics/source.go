package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// DefaultMaxBytes is the default limit on a /metrics body: a vLLM page with
// every histogram is 50-150 KB.
const DefaultMaxBytes = 4 << 20

// accept asks for the classic text format (engines built on
// prometheus_client would otherwise be free to answer OpenMetrics).
const accept = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// Source is the metrics-data-source plugin: it scrapes each endpoint's
// Prometheus metrics over HTTP(S) and parses them (Parse) into Families for
// its extractors. It parses only the families its extractors read
// (FamilyReader) unless Families lists them, or an extractor does not say.
//
// Scrapes run on the data layer's bounded worker pool (Workers) every
// Interval, each bounded by Timeout; a body over MaxBytes is refused without
// being read past the limit. Any failure (connection refused, timeout, a
// status other than 200, an oversized or malformed body) fails the
// collection: the extractors keep the last metrics, marked stale.
type Source struct {
	Scheme string `json:"scheme" doc:"http or https"`
	Path   string `json:"path" doc:"URL path of the metrics page"`
	Port   int    `json:"port,omitempty" doc:"scrape this port instead of the endpoint's (0: the endpoint's port)"`
	// InsecureSkipVerify defaults to true: engines serve metrics with
	// self-signed certificates more often than not (SPEC §9).
	InsecureSkipVerify bool             `json:"insecureSkipVerify" doc:"with https, do not verify the endpoint's certificate"`
	CACertPath         string           `json:"caCertPath,omitempty" doc:"PEM bundle of the CAs that sign endpoint certificates"`
	ClientCertPath     string           `json:"clientCertPath,omitempty" doc:"PEM client certificate for mutual TLS (with clientKeyPath)"`
	ClientKeyPath      string           `json:"clientKeyPath,omitempty" doc:"PEM key of the client certificate"`
	Interval           plugins.Duration `json:"interval" doc:"time between two scrapes of an endpoint"`
	Timeout            plugins.Duration `json:"timeout" doc:"limit on one scrape, connection included"`
	Workers            int              `json:"workers" doc:"scrapes running at once, across endpoints"`
	MaxBytes           int64            `json:"maxBytes" doc:"largest metrics body accepted, in bytes"`
	Families           []string         `json:"families,omitempty" doc:"metric families to parse (default: those the extractors read)"`

	client  *http.Client
	filter  *Filter
	mu      sync.Mutex
	parsers map[string]*Parser // by endpoint name
}

var (
	_ datalayer.DataSource       = (*Source)(nil)
	_ datalayer.EndpointListener = (*Source)(nil)
	_ datalayer.Poller           = (*Source)(nil)
	_ datalayer.Binder           = (*Source)(nil)
	_ datalayer.Typed            = (*Source)(nil)
)

// SetDefaults sets the defaults before the parameters are decoded: http,
// /metrics, certificates not verified (an engine's metrics endpoint), every
// 50ms, 1s timeout, 32 workers, 4 MiB bodies.
func (s *Source) SetDefaults() {
	s.Scheme = "http"
	s.Path = "/metrics"
	s.InsecureSkipVerify = true
	s.Interval = plugins.Duration(datalayer.DefaultPolling.Interval)
	s.Timeout = plugins.Duration(datalayer.DefaultPolling.Timeout)
	s.Workers = datalayer.DefaultPolling.Workers
	s.MaxBytes = DefaultMaxBytes
}

// Validate checks the parameters.
func (s *Source) Validate() error {
	return validateHTTP(s.Scheme, s.Path, s.Port, s.Interval, s.Timeout, s.Workers, s.MaxBytes, s.tls())
}

func validateHTTP(scheme, path string, port int, interval, timeout plugins.Duration, workers int, maxBytes int64, tls datalayer.TLSOptions) error {
	var errs []error
	if scheme != "http" && scheme != "https" {
		errs = append(errs, fmt.Errorf("scheme: %q, want http or https", scheme))
	}
	if !strings.HasPrefix(path, "/") {
		errs = append(errs, fmt.Errorf("path: %q must start with /", path))
	}
	if port < 0 || port > 65535 {
		errs = append(errs, fmt.Errorf("port: %d out of range 0-65535", port))
	}
	if interval <= 0 {
		errs = append(errs, errors.New("interval: must be > 0"))
	}
	if timeout <= 0 {
		errs = append(errs, errors.New("timeout: must be > 0"))
	}
	if workers < 1 || workers > 1024 {
		errs = append(errs, fmt.Errorf("workers: %d, want 1-1024", workers))
	}
	if maxBytes < 1 {
		errs = append(errs, errors.New("maxBytes: must be > 0"))
	}
	if err := tls.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Source) tls() datalayer.TLSOptions {
	return datalayer.TLSOptions{InsecureSkipVerify: s.InsecureSkipVerify, CACertPath: s.CACertPath,
		ClientCertPath: s.ClientCertPath, ClientKeyPath: s.ClientKeyPath}
}

// Init builds the HTTP client (reading the certificates).
func (s *Source) Init(context.Context, plugins.Deps) error {
	c, err := datalayer.NewHTTPClient(s.tls())
	if err != nil {
		return err
	}
	s.client = c
	if len(s.Families) > 0 {
		s.filter = NewFilter(s.Families...)
	}
	return nil
}

// Close closes idle connections.
func (s *Source) Close() error {
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
	return nil
}

// Polling returns Interval, Timeout and Workers.
func (s *Source) Polling() datalayer.Polling {
	return datalayer.Polling{Interval: time.Duration(s.Interval), Timeout: time.Duration(s.Timeout), Workers: s.Workers}
}

// DataType returns the type of the collected data: Families.
func (s *Source) DataType() reflect.Type { return reflect.TypeFor[Families]() }

// Bind parses only the families the extractors read, when every one of them
// says (FamilyReader) and Families is not set.
func (s *Source) Bind(extractors []datalayer.Extractor) error {
	if len(s.Families) > 0 {
		return nil
	}
	var names []string
	for _, x := range extractors {
		r, ok := x.(FamilyReader)
		if !ok {
			s.filter = nil
			return nil
		}
		names = append(names, r.MetricFamilies()...)
	}
	s.filter = NewFilter(names...) // none at all when nobody reads the data
	s.mu.Lock()
	s.parsers = nil
	s.mu.Unlock()
	return nil
}

// Filter returns the families the source parses (nil: all).
func (s *Source) Filter() *Filter { return s.filter }

// URL returns the URL the source scrapes for e.
func (s *Source) URL(e *datalayer.Endpoint) string {
	hostPort := e.HostPort()
	if s.Port > 0 {
		hostPort = net.JoinHostPort(e.Address, strconv.Itoa(s.Port))
	}
	return s.Scheme + "://" + hostPort + s.Path
}

var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Collect scrapes e and returns its Families.
func (s *Source) Collect(ctx context.Context, e *datalayer.Endpoint) (any, error) {
	if s.client == nil {
		return nil, errors.New("metrics-data-source: not initialised (call Init)")
	}
	buf := bodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 { // keep ordinary pages' buffers only
			bodies.Put(buf)
		}
	}()
	if err := datalayer.HTTPGet(ctx, s.client, s.URL(e), accept, s.MaxBytes, buf); err != nil {
		return nil, err
	}
	fams, err := s.parser(e.Name).Parse(buf.Bytes())
	if err != nil {
		return nil, err
	}
	return fams, nil
}

// parser returns the endpoint's Parser, which reuses what did not change
// since its previous scrape.
func (s *Source) parser(name string) *Parser {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parsers[name]
	if p == nil {
		if s.parsers == nil {
			s.parsers = map[string]*Parser{}
		}
		p = NewParser(s.filter)
		s.parsers[name] = p
	}
	return p
}

// EndpointAdded does nothing.
func (s *Source) EndpointAdded(*datalayer.Endpoint) {}

// EndpointRemoved forgets the endpoint's previous scrape.
func (s *Source) EndpointRemoved(e *datalayer.Endpoint) {
	s.mu.Lock()
	delete(s.parsers, e.Name)
	s.mu.Unlock()
}
