package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
)

// File is the file-discovery plugin: endpoints from a YAML or JSON file (see
// the package documentation for the format). With WatchFile the file is
// re-read every WatchInterval and a changed content is reported; the data
// layer applies the adds, updates and removes.
//
// Init reads the file, so a configuration naming a missing or invalid file
// fails at start-up. With no Path the plugin reports no endpoints (and says so
// in the log): every plugin must build without parameters.
type File struct {
	Path          string           `json:"path,omitempty" doc:"the endpoints file (YAML or JSON)"`
	WatchFile     bool             `json:"watchFile,omitempty" doc:"reload the file when its content changes"`
	WatchInterval plugins.Duration `json:"watchInterval" doc:"how often a watched file is checked"`
	MaxBytes      int64            `json:"maxBytes" doc:"largest file accepted, in bytes"`

	log  *slog.Logger
	mu   sync.Mutex // guards the fields below between Init and Run
	cur  []datalayer.Target
	data []byte // content of the last file read (good or not)

	loads, errs atomic.Uint64
}

var _ datalayer.Source = (*File)(nil)

// SetDefaults sets the defaults before the parameters are decoded: check
// the file every second, read files up to 1 MiB.
func (f *File) SetDefaults() {
	f.WatchInterval = plugins.Duration(time.Second)
	f.MaxBytes = 1 << 20
}

// Validate checks the parameters.
func (f *File) Validate() error {
	var errs []error
	if f.WatchInterval <= 0 {
		errs = append(errs, errors.New("watchInterval: must be > 0"))
	}
	if f.MaxBytes < 1 {
		errs = append(errs, errors.New("maxBytes: must be > 0"))
	}
	return errors.Join(errs...)
}

// Init reads the file: a missing or invalid file is an error.
func (f *File) Init(_ context.Context, deps plugins.Deps) error {
	f.log = deps.Logger
	if f.Path == "" {
		return nil
	}
	data, err := f.read()
	if err != nil {
		return err
	}
	ts, err := ParseFile(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	f.mu.Lock()
	f.cur, f.data = ts, data
	f.mu.Unlock()
	f.loads.Add(1)
	return nil
}

// FileStats counts a File's loads.
type FileStats struct {
	Loads  uint64 // good contents applied, the first included
	Errors uint64 // reads or contents rejected (each distinct failure once)
}

// Stats returns the counters.
func (f *File) Stats() FileStats { return FileStats{Loads: f.loads.Load(), Errors: f.errs.Load()} }

// Run reports the endpoints read by Init, then, with WatchFile, every changed
// content that is valid, until ctx is done.
func (f *File) Run(ctx context.Context, update func([]datalayer.Target)) error {
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if f.Path == "" {
		f.log.Warn("file-discovery: no path configured; no endpoints")
		update(nil)
		<-ctx.Done()
		return nil
	}
	f.mu.Lock()
	initialised := f.data != nil
	f.mu.Unlock()
	if !initialised {
		if err := f.Init(ctx, plugins.Deps{Logger: f.log}); err != nil {
			return err
		}
	}
	f.mu.Lock()
	cur := append([]datalayer.Target(nil), f.cur...)
	f.mu.Unlock()
	update(cur)
	if !f.WatchFile {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(time.Duration(f.WatchInterval))
	defer t.Stop()
	lastErr, readFailed := "", false
	fail := func(err error) {
		if msg := err.Error(); msg != lastErr {
			lastErr = msg
			f.errs.Add(1)
			f.log.Warn("file-discovery: keeping the last endpoints", "path", f.Path, "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		data, err := f.read()
		if err != nil {
			fail(err)
			readFailed = true
			continue
		}
		if readFailed { // back after vanishing or failing to read
			readFailed, lastErr = false, ""
		}
		f.mu.Lock()
		same := bytes.Equal(data, f.data)
		f.data = data
		f.mu.Unlock()
		if same {
			continue
		}
		ts, err := ParseFile(data)
		if err != nil {
			fail(fmt.Errorf("%s: %w", f.Path, err))
			continue
		}
		lastErr = ""
		f.mu.Lock()
		f.cur = ts
		f.mu.Unlock()
		f.loads.Add(1)
		f.log.Info("file-discovery: reloaded", "path", f.Path, "endpoints", len(ts))
		update(append([]datalayer.Target(nil), ts...))
	}
}

// read returns the file's content, refusing a file over MaxBytes.
func (f *File) read() ([]byte, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("file-discovery: %s: the file is missing", f.Path)
		}
		return nil, fmt.Errorf("file-discovery: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, f.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("file-discovery: %s: %w", f.Path, err)
	}
	if int64(len(data)) > f.MaxBytes {
		return nil, fmt.Errorf("file-discovery: %s: over the limit of %d bytes", f.Path, f.MaxBytes)
	}
	return data, nil
}

// fileDoc is the file format.
type fileDoc struct {
	Endpoints []fileEntry `yaml:"endpoints"`
}

type fileEntry struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace"` // accepted for llm-d files; not used
	Address   string            `yaml:"address"`
	Port      portValue         `yaml:"port"`
	Labels    map[string]string `yaml:"labels"`
}

// portValue is a port written as a number or as a string ("8000").
type portValue int

func (p *portValue) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: port: want a number", n.Line)
	}
	v, err := strconv.Atoi(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("line %d: port: %q is not a number", n.Line, n.Value)
	}
	*p = portValue(v)
	return nil
}

// ParseFile parses an endpoints file (YAML, or JSON, which is YAML too) and
// checks every entry. Unknown fields are errors.
func ParseFile(data []byte) ([]datalayer.Target, error) {
	var doc fileDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file: want endpoints: [...]")
		}
		return nil, fmt.Errorf("invalid endpoints file: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	ts := make([]datalayer.Target, len(doc.Endpoints))
	for i, e := range doc.Endpoints {
		ts[i] = datalayer.Target{Name: e.Name, Address: e.Address, Port: int(e.Port), Labels: e.Labels}
	}
	if err := validateTargets(ts); err != nil {
		return nil, err
	}
	return ts, nil
}
