package charts

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eppkit/eppkit/sim"
)

func TestWrite(t *testing.T) {
	cfgs, err := sim.DemoConfigs()
	if err != nil {
		t.Fatal(err)
	}
	w := sim.DemoTenants(4, 5*time.Second, 1)
	res, err := sim.Run(context.Background(), cfgs, sim.Options{Servers: 4, Seed: 1,
		Workload: func() (sim.Workload, error) { return w.New(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := Write(res.Series(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1+len(cfgs) {
		t.Fatalf("wrote %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("\x89PNG")) || len(data) < 5000 {
			t.Errorf("%s: %d bytes, not a PNG chart", filepath.Base(f), len(data))
		}
	}
}
