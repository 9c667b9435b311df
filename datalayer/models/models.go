package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// Model is one entry of a /v1/models answer.
type Model struct {
	ID string `json:"id"`
	// Parent is the base model of a LoRA adapter ("" for a base model).
	Parent string `json:"parent,omitempty"`
	// Root is the model the entry was loaded from, as the engine says.
	Root string `json:"root,omitempty"`
}

// Key is the endpoint attribute holding the endpoint's models.
var Key = plugins.NewKey[[]Model]("models")

// Of returns the models e serves, and whether they are known.
func Of(e *datalayer.Endpoint) ([]Model, bool) { return plugins.Get(&e.Attrs, Key) }

// Serves reports whether e is known to serve the model or adapter name.
func Serves(e *datalayer.Endpoint, name string) bool {
	ms, _ := Of(e)
	for _, m := range ms {
		if m.ID == name {
			return true
		}
	}
	return false
}

// Source is the models-data-source plugin. TLS verification is on by
// default: unlike the metrics page, this is the engine's API.
type Source struct {
	Scheme             string           `json:"scheme" doc:"http or https"`
	Path               string           `json:"path" doc:"URL path of the model list"`
	Port               int              `json:"port,omitempty" doc:"poll this port instead of the endpoint's (0: the endpoint's port)"`
	InsecureSkipVerify bool             `json:"insecureSkipVerify,omitempty" doc:"with https, do not verify the endpoint's certificate"`
	CACertPath         string           `json:"caCertPath,omitempty" doc:"PEM bundle of the CAs that sign endpoint certificates"`
	ClientCertPath     string           `json:"clientCertPath,omitempty" doc:"PEM client certificate for mutual TLS (with clientKeyPath)"`
	ClientKeyPath      string           `json:"clientKeyPath,omitempty" doc:"PEM key of the client certificate"`
	Interval           plugins.Duration `json:"interval" doc:"time between two polls of an endpoint"`
	Timeout            plugins.Duration `json:"timeout" doc:"limit on one poll, connection included"`
	Workers            int              `json:"workers" doc:"polls running at once, across endpoints"`
	MaxBytes           int64            `json:"maxBytes" doc:"largest answer accepted, in bytes"`

	client *http.Client
}

var (
	_ datalayer.DataSource = (*Source)(nil)
	_ datalayer.Extractor  = (*Source)(nil)
	_ datalayer.Poller     = (*Source)(nil)
	_ datalayer.Typed      = (*Source)(nil)
	_ datalayer.Extractor  = (*Extractor)(nil)
	_ datalayer.Typed      = (*Extractor)(nil)
)

// SetDefaults sets the defaults before the parameters are decoded: http,
// /v1/models, every 5s, 2s timeout, 4 workers, 1 MiB bodies.
func (s *Source) SetDefaults() {
	s.Scheme = "http"
	s.Path = "/v1/models"
	s.Interval = plugins.Duration(5 * time.Second)
	s.Timeout = plugins.Duration(2 * time.Second)
	s.Workers = 4
	s.MaxBytes = 1 << 20
}

func (s *Source) tls() datalayer.TLSOptions {
	return datalayer.TLSOptions{InsecureSkipVerify: s.InsecureSkipVerify, CACertPath: s.CACertPath,
		ClientCertPath: s.ClientCertPath, ClientKeyPath: s.ClientKeyPath}
}

// Validate checks the parameters.
func (s *Source) Validate() error {
	var errs []error
	if s.Scheme != "http" && s.Scheme != "https" {
		errs = append(errs, fmt.Errorf("scheme: %q, want http or https", s.Scheme))
	}
	if !strings.HasPrefix(s.Path, "/") {
		errs = append(errs, fmt.Errorf("path: %q must start with /", s.Path))
	}
	if s.Port < 0 || s.Port > 65535 {
		errs = append(errs, fmt.Errorf("port: %d out of range 0-65535", s.Port))
	}
	if s.Interval <= 0 || s.Timeout <= 0 {
		errs = append(errs, errors.New("interval and timeout: must be > 0"))
	}
	if s.Workers < 1 || s.Workers > 1024 {
		errs = append(errs, fmt.Errorf("workers: %d, want 1-1024", s.Workers))
	}
	if s.MaxBytes < 1 {
		errs = append(errs, errors.New("maxBytes: must be > 0"))
	}
	tls := s.tls()
	if err := tls.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Init builds the HTTP client.
func (s *Source) Init(context.Context, plugins.Deps) error {
	c, err := datalayer.NewHTTPClient(s.tls())
	s.client = c
	return err
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

// DataType returns []Model.
func (s *Source) DataType() reflect.Type { return reflect.TypeFor[[]Model]() }

// Collect fetches e's model list.
func (s *Source) Collect(ctx context.Context, e *datalayer.Endpoint) (any, error) {
	if s.client == nil {
		return nil, errors.New("models-data-source: not initialised (call Init)")
	}
	hostPort := e.HostPort()
	if s.Port > 0 {
		hostPort = net.JoinHostPort(e.Address, strconv.Itoa(s.Port))
	}
	var buf bytes.Buffer
	if err := datalayer.HTTPGet(ctx, s.client, s.Scheme+"://"+hostPort+s.Path, "application/json", s.MaxBytes, &buf); err != nil {
		return nil, err
	}
	return Parse(buf.Bytes())
}

// Extract stores the models in e's Key attribute.
func (s *Source) Extract(data any, e *datalayer.Endpoint) error { return extract(data, e) }

// Parse decodes an OpenAI-compatible model list: {"data": [{"id": ...}]}.
func Parse(body []byte) ([]Model, error) {
	var doc struct {
		Data *[]Model `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("models: malformed model list: %w", err)
	}
	if doc.Data == nil {
		return nil, errors.New(`models: malformed model list: no "data" array`)
	}
	out := make([]Model, 0, len(*doc.Data))
	for i, m := range *doc.Data {
		if m.ID == "" {
			return nil, fmt.Errorf("models: malformed model list: data[%d] has no id", i)
		}
		out = append(out, m)
	}
	return out, nil
}

// Extractor is the models-data-extractor plugin: it stores a
// models-data-source's list in the endpoint's Key attribute.
type Extractor struct{}

// DataType returns []Model.
func (Extractor) DataType() reflect.Type { return reflect.TypeFor[[]Model]() }

// Extract stores the models in e's Key attribute.
func (Extractor) Extract(data any, e *datalayer.Endpoint) error { return extract(data, e) }

func extract(data any, e *datalayer.Endpoint) error {
	ms, ok := data.([]Model)
	if !ok {
		return fmt.Errorf("models: got %T, want []models.Model", data)
	}
	plugins.Set(&e.Attrs, Key, ms)
	return nil
}
