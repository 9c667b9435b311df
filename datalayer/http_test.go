package datalayer_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
)

// hugeHandler streams a 1 GB body, counting what it managed to write.
func hugeHandler(withLength bool, written *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		const size = 1 << 30
		if withLength {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		chunk := bytes.Repeat([]byte("vllm:num_requests_waiting 1\n"), 1<<12)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client hung up
			}
			written.Add(int64(len(chunk)))
		}
	}
}

func TestHTTPGetBodyLimit(t *testing.T) {
	checkGoroutines(t)
	c, err := datalayer.NewHTTPClient(datalayer.TLSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	const limit = 1 << 20
	for _, withLength := range []bool{true, false} {
		var written atomic.Int64
		srv := httptest.NewServer(hugeHandler(withLength, &written))
		var buf bytes.Buffer
		start := time.Now()
		err := datalayer.HTTPGet(t.Context(), c, srv.URL, "", limit, &buf)
		if !errors.Is(err, datalayer.ErrBodyTooLarge) {
			t.Errorf("Content-Length %v: got %v", withLength, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %v", d)
		}
		srv.Close() // waits for the handler, which stops when the client hangs up
		// What the server got out before noticing: the limit plus what the
		// socket buffers hold, far from 1 GB.
		if n := written.Load(); n > 64<<20 {
			t.Errorf("Content-Length %v: the server wrote %d MB: the body was read past the limit", withLength, n>>20)
		}
	}
}

func TestHTTPGetStatusAndSmallBody(t *testing.T) {
	checkGoroutines(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		if got := r.Header.Get("Accept"); got != "text/plain" {
			t.Errorf("Accept %q", got)
		}
		w.Write([]byte("exactly16bytes!\n"))
	}))
	defer srv.Close()
	c, _ := datalayer.NewHTTPClient(datalayer.TLSOptions{})
	defer c.CloseIdleConnections()
	var buf bytes.Buffer
	if err := datalayer.HTTPGet(t.Context(), c, srv.URL+"/missing", "text/plain", 100, &buf); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
	if err := datalayer.HTTPGet(t.Context(), c, srv.URL, "text/plain", 16, &buf); err != nil || buf.String() != "exactly16bytes!\n" {
		t.Errorf("at the limit: %v %q", err, buf.String())
	}
	if err := datalayer.HTTPGet(t.Context(), c, srv.URL, "text/plain", 15, &buf); !errors.Is(err, datalayer.ErrBodyTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
}

func TestTLSOptionsValidate(t *testing.T) {
	if _, err := datalayer.NewHTTPClient(datalayer.TLSOptions{ClientCertPath: "c.pem"}); err == nil {
		t.Error("cert without key accepted")
	}
	if _, err := datalayer.NewHTTPClient(datalayer.TLSOptions{CACertPath: "/no/such/file"}); err == nil {
		t.Error("missing CA accepted")
	}
}
