package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure.
const RequireEnv = "EPPKIT_REQUIRE_REDIS"

// startTimeout bounds how long Start and Restart wait for the server to
// answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process started by Start.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	tb   testing.TB
	bin  string
	dir  string
	port int

	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan error // the running server's exit status, once it exits
	oldServer bool       // a server without --enable-debug-command
}

// Binary returns the path of redis-server, or an error saying why there is
// none.
func Binary() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redistest: redis-server not found on PATH (install the redis-server package, e.g. apt-get install -y redis-server): %w", err)
	}
	return bin, nil
}

// Start starts a redis-server for the test and stops it when the test ends.
// Without redis-server it skips the test, or fails it if RequireEnv is 1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("%v (%s=1 requires it)", err, RequireEnv)
		}
		tb.Skipf("%v; skipping (set %s=1 to fail instead)", err, RequireEnv)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	var last error
	for range 3 { // the free port may be taken before the server binds it
		if s.port, err = freePort(); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if last = s.start(); last == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("redistest: %v", last)
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	err := s.launch()
	if errors.Is(err, errOldServer) {
		s.oldServer = true // before Redis 7: no such option, DEBUG always on
		err = s.launch()
	}
	return err
}

// errOldServer marks a server that did not know --enable-debug-command.
var errOldServer = errors.New("redis-server before 7.0")

// launch starts the process and waits for its PING.
func (s *Server) launch() error {
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "yes",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning", "--logfile", ""}
	if !s.oldServer {
		args = append(args, "--enable-debug-command", "local") // DEBUG SLEEP for the timeout tests (Redis ≥ 7)
	}
	cmd := exec.Command(s.bin, args...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = &syncWriter{w: out}, &syncWriter{w: out}
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startTimeout)
	for {
		if r, err := s.command(200*time.Millisecond, "PING"); err == nil && r == "PONG" {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case err := <-exited:
			if !s.oldServer && strings.Contains(out.String(), "enable-debug-command") {
				return errOldServer
			}
			return fmt.Errorf("redis-server on port %d exited: %v\n%s", s.port, err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer PING within %v\n%s", s.port, startTimeout, out.String())
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after two seconds) and waits
// for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(terminate)
	select {
	case <-s.exited:
	case <-time.After(2 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd, s.exited = nil, nil
}

// Restart stops the server and starts a new, empty one on the same port (a
// restart without persistence loses every key, like a failover to a fresh
// node).
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	var err error
	for range 50 { // the old socket may linger a moment
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// Do sends one command and returns its reply as text (a status, a bulk
// string, an integer, or an array's elements joined by newlines). A server
// error reply is returned as an error. timeout bounds the whole exchange.
func (s *Server) Do(timeout time.Duration, args ...string) (string, error) {
	return s.command(timeout, args...)
}

func (s *Server) command(timeout time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch body := line[1:]; line[0] {
	case '+', ':':
		return body, nil
	case '-':
		return "", errors.New(body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return "", err
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

// syncWriter serialises the server's stdout and stderr into one builder.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
