package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// TestP6ScrapeCPU is BENCHMARKS.md P6: 100 endpoints serving a realistic
// vLLM /metrics page, scraped every 50 ms by metrics-data-source and
// core-metrics-extractor through the data layer Runtime; it reports the CPU
// the picker uses per wall second (goal ≤ 0.3 cores).
//
// Method: the 100 HTTP servers run in a child process (this test binary
// re-executed as TestP6Servers), so getrusage(RUSAGE_SELF) of this process
// counts only the picker side: the scrape loop, the HTTP client and its
// kernel time (socket reads), parsing, extraction, publishing and the
// garbage collector. Every page changes its queue, running and KV values on
// each request, as a busy engine's do. The figure is taken after a warm-up
// of 2 s.
//
// It takes a while, so it runs only when asked:
//
//	EPPKIT_P6=10s go test -run TestP6ScrapeCPU -v ./datalayer/metrics/
func TestP6ScrapeCPU(t *testing.T) {
	d := os.Getenv("EPPKIT_P6")
	if d == "" {
		t.Skip("set EPPKIT_P6=10s (the measurement time) to run")
	}
	measure, err := time.ParseDuration(d)
	if err != nil {
		t.Fatal(err)
	}
	const endpoints, interval = 100, 50 * time.Millisecond

	child := exec.Command(os.Args[0], "-test.run=^TestP6Servers$")
	child.Env = append(os.Environ(), "EPPKIT_P6_SERVERS="+strconv.Itoa(endpoints))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child exits when its stdin closes
		_ = child.Wait()
	}()
	var targets []datalayer.Target
	sc := bufio.NewScanner(stdout)
	for len(targets) < endpoints && sc.Scan() {
		addr, ok := strings.CutPrefix(sc.Text(), "ADDR ")
		if !ok {
			continue
		}
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		targets = append(targets, datalayer.Target{Name: fmt.Sprintf("vllm-%03d", len(targets)), Address: host, Port: p})
	}
	if len(targets) != endpoints {
		t.Fatalf("the server process started %d servers", len(targets))
	}

	src := source(t, fmt.Sprintf(`{"interval": %q}`, interval))
	x := extractor(t, "")
	if err := x.Init(t.Context(), plugins.Deps{}); err != nil {
		t.Fatal(err)
	}
	rt, err := datalayer.NewRuntime(datalayer.Config{
		Discovery: datalayer.SourceFunc(func(ctx context.Context, update func([]datalayer.Target)) error {
			update(targets)
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
	defer rt.Close()

	time.Sleep(2 * time.Second) // warm-up: connections, buffers, parsers
	cpu0, wall0, st0 := cpuTime(t), time.Now(), rt.Stats()[0]
	serverCPU0 := procCPU(child.Process.Pid)
	time.Sleep(measure)
	cpu1, wall1, st1 := cpuTime(t), time.Now(), rt.Stats()[0]
	serverCPU1 := procCPU(child.Process.Pid)

	wall := wall1.Sub(wall0).Seconds()
	cores := (cpu1 - cpu0).Seconds() / wall
	scrapes := float64(st1.Collections - st0.Collections)
	t.Logf("P6: %d endpoints every %v for %.1fs: %.0f scrapes/s, %d failures, %d skipped",
		endpoints, interval, wall, scrapes/wall, st1.Failures-st0.Failures, st1.Skipped-st0.Skipped)
	t.Logf("P6: picker CPU %.3f cores (%.1f µs per scrape); the servers' process used %.3f cores",
		cores, (cpu1-cpu0).Seconds()/scrapes*1e6, (serverCPU1-serverCPU0).Seconds()/wall)
	for _, e := range rt.Endpoints() {
		if !e.Metrics.Usable() {
			t.Errorf("%s: metrics not usable: %+v", e.Name, e.Metrics)
			break
		}
	}
	if want := 0.8 * float64(endpoints) * wall / interval.Seconds(); scrapes < want {
		t.Errorf("%.0f scrapes, want at least %.0f", scrapes, want)
	}
	if cores > 0.3 {
		t.Logf("P6: over the goal of 0.3 cores")
	}
}

// cpuTime returns the user and system CPU time of this process.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the CPU time of process pid from /proc (0 if unknown).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks (USER_HZ = 100)
}

// TestP6Servers is the server process of TestP6ScrapeCPU: it serves
// EPPKIT_P6_SERVERS vLLM pages on 127.0.0.1, prints "ADDR host:port" for
// each, and exits when its stdin closes.
func TestP6Servers(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EPPKIT_P6_SERVERS"))
	if n == 0 {
		t.Skip("the server process of TestP6ScrapeCPU")
	}
	pages := variants(readFile(t, "vllm.prom"), 16)
	var next atomic.Uint64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := pages[next.Add(1)%uint64(len(pages))]
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.Write(page)
	})
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(l)
		fmt.Printf("ADDR %s\n", l.Addr())
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Minute):
	}
	os.Exit(0)
}
