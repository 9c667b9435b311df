package models_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/datalayer/models"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
)

func registry() *plugins.Registry {
	reg := plugins.NewRegistry()
	plugins.Register[*models.Source](reg, "models-data-source")
	plugins.Register[*models.Extractor](reg, "models-data-extractor")
	return reg
}

func TestLifecycle(t *testing.T) {
	pluginstest.TestLifecycle(t, registry(), "models-data-source")
	pluginstest.TestLifecycle(t, registry(), "models-data-extractor")
}

// vLLM's answer with one LoRA adapter loaded.
const vllmModels = `{"object":"list","data":[
 {"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1758901201,"owned_by":"vllm","root":"meta-llama/Llama-3.1-8B-Instruct","parent":null,"max_model_len":131072},
 {"id":"sql-lora","object":"model","created":1758901201,"owned_by":"vllm","root":"/adapters/sql-lora","parent":"meta-llama/Llama-3.1-8B-Instruct"}]}`

func TestParse(t *testing.T) {
	ms, err := models.Parse([]byte(vllmModels))
	if err != nil || len(ms) != 2 || ms[1].Parent != "meta-llama/Llama-3.1-8B-Instruct" || ms[0].Parent != "" || ms[1].Root != "/adapters/sql-lora" {
		t.Errorf("%+v %v", ms, err)
	}
	for _, bad := range []string{``, `[]`, `{"object":"list"}`, `{"data":[{"object":"model"}]}`, `{"data": 3}`} {
		if _, err := models.Parse([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestModelsDataSource(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(vllmModels))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)

	v, err := registry().Build("models-data-source", "models", []byte(`{"interval": "10ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	src := v.(*models.Source)
	if err := src.Init(t.Context(), plugins.Deps{}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rt, err := datalayer.NewRuntime(datalayer.Config{
		Discovery: datalayer.SourceFunc(func(ctx context.Context, update func([]datalayer.Target)) error {
			update([]datalayer.Target{{Name: "e", Address: host, Port: p}})
			<-ctx.Done()
			return nil
		}),
		// No extractor configured: the source extracts its own data.
		Sources: []datalayer.DataSourceConfig{{Name: "models", Source: src}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, _ := rt.Store().Get("e")
		if e != nil && models.Serves(e, "sql-lora") {
			ms, ok := models.Of(e)
			if !ok || len(ms) != 2 || models.Serves(e, "other") {
				t.Errorf("%+v", ms)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("models never collected")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExtractor(t *testing.T) {
	e := datalayer.New("e", "10.0.0.1", 1, nil)
	if err := (models.Extractor{}).Extract([]models.Model{{ID: "m"}}, e); err != nil || !models.Serves(e, "m") {
		t.Errorf("%v", err)
	}
	if err := (models.Extractor{}).Extract("nope", e); err == nil {
		t.Error("wrong data type accepted")
	}
	// A models extractor on the metrics source is a configuration error.
	_, err := datalayer.NewRuntime(datalayer.Config{Sources: []datalayer.DataSourceConfig{{
		Name: "m", Source: typedSource{}, Extractors: []datalayer.NamedExtractor{{Name: "x", Extractor: models.Extractor{}}},
	}}})
	if err == nil || !strings.Contains(err.Error(), "reads []models.Model") {
		t.Errorf("got %v", err)
	}
}

type typedSource struct{ datalayer.DataSourceFunc }

func (typedSource) DataType() reflect.Type { return reflect.TypeFor[string]() }
