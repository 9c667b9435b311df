package datalayer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// TLSOptions configure HTTPS collection from endpoints.
type TLSOptions struct {
	// InsecureSkipVerify skips verifying the endpoint's certificate.
	InsecureSkipVerify bool
	// CACertPath is a PEM bundle of the CAs that sign endpoint certificates
	// (default: the system pool).
	CACertPath string
	// ClientCertPath and ClientKeyPath are a PEM certificate and key to
	// present (mutual TLS); set both or neither.
	ClientCertPath, ClientKeyPath string
}

// Validate checks that the client certificate and key come together.
func (o *TLSOptions) Validate() error {
	if (o.ClientCertPath == "") != (o.ClientKeyPath == "") {
		return errors.New("clientCertPath and clientKeyPath must be set together")
	}
	return nil
}

// NewHTTPClient returns the HTTP client data sources share across
// endpoints: connections kept alive per endpoint (two idle at most, no
// global cap, so a large pool does not thrash), no proxy from the
// environment (endpoints are addressed directly), no transparent gzip
// (inflating costs the picker more CPU than reading plain text), and TLS per
// o. Timeouts come from the request context.
func NewHTTPClient(o TLSOptions) (*http.Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{InsecureSkipVerify: o.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // explicit option
	if o.CACertPath != "" {
		pem, err := os.ReadFile(o.CACertPath)
		if err != nil {
			return nil, fmt.Errorf("caCertPath: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caCertPath: %s holds no PEM certificate", o.CACertPath)
		}
		cfg.RootCAs = pool
	}
	if o.ClientCertPath != "" {
		cert, err := tls.LoadX509KeyPair(o.ClientCertPath, o.ClientKeyPath)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		TLSClientConfig:     cfg,
	}
	return &http.Client{Transport: tr}, nil
}

// ErrBodyTooLarge is returned by HTTPGet for a response over its limit.
var ErrBodyTooLarge = errors.New("response body too large")

// HTTPGet fetches url and reads the body into buf (reset first). A body over
// max bytes is ErrBodyTooLarge and is not read past the limit: it is refused
// on its Content-Length, or after max+1 bytes, and the connection is closed
// rather than drained. A status other than 200 is an error naming it.
func HTTPGet(ctx context.Context, c *http.Client, url, accept string, max int64, buf *bytes.Buffer) error {
	buf.Reset()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if resp.ContentLength > max {
		return fmt.Errorf("GET %s: %w: Content-Length %d, limit %d", url, ErrBodyTooLarge, resp.ContentLength, max)
	}
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, max+1)); err != nil {
		return fmt.Errorf("GET %s: reading the body: %w", url, err)
	}
	if int64(buf.Len()) > max {
		return fmt.Errorf("GET %s: %w: over the limit of %d bytes", url, ErrBodyTooLarge, max)
	}
	return nil
}
