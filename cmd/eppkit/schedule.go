package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/eppkit/eppkit/config"
	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
)

const scheduleSynopsis = `schedule [--endpoints FILE] [--request FILE] [--config FILE] [--path P]
                [--explain] [--seed N] [--header "k: v"]... [--history FILE]
                [--objectives FILE] [--rewrites FILE] [--output text|json]

Runs one request through the whole pipeline offline: parse (the parser is
chosen by --path), model rewrite (--rewrites, or the x-llm-d-model-name-rewrite
header), objective and priority (--objectives and the
x-llm-d-inference-objective header), admission, producers, scheduling,
pre-request hooks; prints the pick, primary first, then fallbacks, the
incoming and target model, or the rejection with its status. Without --config
the built-in default configuration is used; without --endpoints or --request
an embedded demo pool of four endpoints and a chat request are.`

// headers collects repeated --header "name: value" flags.
type headers map[string]string

func (h headers) String() string { return "" }

func (h headers) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want \"name: value\", got %q", s)
	}
	h[strings.ToLower(name)] = strings.TrimSpace(value)
	return nil
}

// scheduleOutput is the machine-readable result (SPEC §10). Scripts rely on
// these field names: add fields, never rename them.
type scheduleOutput struct {
	Endpoints     []string          `json:"endpoints"`
	IncomingModel string            `json:"incomingModel"`
	TargetModel   string            `json:"targetModel"`
	Body          json.RawMessage   `json:"body"`
	Trace         *scheduling.Trace `json:"trace"`
}

type errorOutput struct {
	Error struct {
		Status  int    `json:"status"`
		Reason  string `json:"reason"`
		Message string `json:"message,omitempty"`
	} `json:"error"`
	Trace *scheduling.Trace `json:"trace,omitempty"`
}

func (c *cli) schedule(args []string) int {
	fs := c.flags("schedule", scheduleSynopsis)
	var (
		configFile = fs.String("config", "", "EndpointPickerConfig YAML (default: the built-in default configuration)")
		epFile     = fs.String("endpoints", "", "endpoints YAML: endpoints[]{name, address, port, labels, metrics{waiting, running, kvUsage, lora{active, waiting, max}}}")
		reqFile    = fs.String("request", "", "request body (JSON)")
		path       = fs.String("path", "/v1/chat/completions", "request URL path; selects the parser")
		explain    = fs.Bool("explain", false, "print the decision trace: filters, every scorer's scores, totals and why the pick")
		seed       = fs.Uint64("seed", 0, "random seed for tie-breaks and random pickers (default: a fresh one, printed with --explain)")
		output     = fs.String("output", "text", "output format: text or json")
		hdrs       = headers{}
	)
	fs.Var(hdrs, "header", "request header \"name: value\" (repeatable)")
	objectives := fs.String("objectives", "", "InferenceObjective YAML documents (metadata.name, spec.priority); the x-llm-d-inference-objective header picks one")
	rewrites := fs.String("rewrites", "", "InferenceModelRewrite YAML documents (spec.rules[]{matches[]{model{value}}, targets[]{modelRewrite, weight}})")
	history := fs.String("history", "", "JSON list of earlier requests and where each went, [{\"endpoint\": \"ip:port\", \"path\": P, \"body\": {...}}], replayed first to warm the prefix index")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return c.usageError("schedule: unexpected argument %q", fs.Arg(0))
	case *output != "text" && *output != "json":
		return c.usageError("schedule: --output must be text or json, not %q", *output)
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if !seedSet {
		*seed = rand.Uint64()
	}

	cfg, err := c.loadConfig(*configFile)
	if err != nil {
		return c.configError(*configFile, err)
	}
	ctx := context.Background()
	// Metrics in the endpoints file are as of now; a clock standing still at
	// now keeps them fresh for staleness checks however slow the run.
	now := time.Now()
	rt, err := config.Build(ctx, cfg, c.registry(), config.Options{Seed: *seed, Clock: fixedClock(now)})
	if err != nil {
		return c.configError(*configFile, err)
	}
	defer rt.Close()
	// Warnings that change this decision (a profile lost a plugin) are shown
	// with --explain; config check lists them all.
	shown := 0
	for _, w := range rt.Warnings {
		if *explain && strings.HasPrefix(w.Path, "schedulingProfiles") {
			fmt.Fprintf(c.stderr, "warning: %s\n", w)
			shown++
		}
	}
	if n := len(rt.Warnings) - shown; n > 0 {
		fmt.Fprintf(c.stderr, "eppkit: %d configuration warnings (eppkit config check lists them)\n", n)
	}
	epName, epData, err := readInput(*epFile, "demo/endpoints.yaml")
	if err != nil {
		return c.fail("%v", err)
	}
	eps, err := loadEndpoints(epName, epData, now)
	if err != nil {
		return c.fail("%v", err)
	}
	_, body, err := readInput(*reqFile, "demo/request.json")
	if err != nil {
		return c.fail("%v", err)
	}
	if *history != "" {
		data, err := os.ReadFile(*history)
		if err != nil {
			return c.fail("%v", err)
		}
		n, err := replayHistory(ctx, rt, eps, *history, data)
		if err != nil {
			return c.fail("%v", err)
		}
		if *explain {
			fmt.Fprintf(c.stdout, "history: replayed %d earlier requests\n", n)
		}
	}

	if *objectives != "" {
		o, err := config.LoadObjectivesFile(*objectives)
		if err != nil {
			return c.configError(*objectives, err)
		}
		rt.Director.SetObjectives(o)
	}
	if *rewrites != "" {
		rws, err := config.LoadModelRewritesFile(*rewrites)
		if err != nil {
			return c.configError(*rewrites, err)
		}
		compiled, err := requestcontrol.NewModelRewrites(rws...)
		if err != nil {
			return c.fail("%s: %v", *rewrites, err)
		}
		rt.Director.SetModelRewrites(compiled)
	}

	var trace *scheduling.Trace
	if *explain || *output == "json" {
		trace = &scheduling.Trace{}
	}
	rt.Director.Pool = requestcontrol.StaticPool(eps)
	x, err := rt.Director.HandleRequest(ctx, &requestcontrol.Inbound{
		ID: "eppkit-schedule", Path: *path, Headers: hdrs, Body: body, Trace: trace,
	})
	if err != nil {
		return c.reject(*output, requestcontrol.Reject(err), trace)
	}
	defer x.Close(nil) // offline: no response will come
	req, decision := x.Request, x.Decision

	if *output == "json" {
		out := scheduleOutput{
			Endpoints:     decision.Endpoints,
			IncomingModel: req.IncomingModel,
			TargetModel:   req.TargetModel,
			Body:          compact(x.Body),
			Trace:         trace,
		}
		return c.writeJSON(out, exitOK)
	}
	if *explain {
		fmt.Fprintf(c.stdout, "seed: %d\n%s\n", *seed, trace)
	}
	fmt.Fprintf(c.stdout, "endpoint: %s\n", decision.Endpoints[0])
	if len(decision.Endpoints) > 1 {
		fmt.Fprintf(c.stdout, "fallbacks: %s\n", strings.Join(decision.Endpoints[1:], ", "))
	}
	if req.IncomingModel == req.TargetModel {
		fmt.Fprintf(c.stdout, "model: %s\n", req.TargetModel)
	} else {
		fmt.Fprintf(c.stdout, "model: %s → %s\n", req.IncomingModel, req.TargetModel)
	}
	if obj := requestcontrol.Objective(req); obj != "" {
		fmt.Fprintf(c.stdout, "objective: %s (priority %d)\n", obj, req.Priority)
	}
	fmt.Fprintf(c.stdout, "x-gateway-destination-endpoint: %s\n", decision.Header())
	for _, k := range slices.Sorted(maps.Keys(req.AddedHeaders)) {
		fmt.Fprintf(c.stdout, "%s: %s\n", k, req.AddedHeaders[k])
	}
	return exitOK
}

// fixedClock is a clock that always says the same time.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// reject prints a rejection and returns the failure status.
func (c *cli) reject(output string, r *requestcontrol.Rejection, trace *scheduling.Trace) int {
	if output == "json" {
		var out errorOutput
		out.Error.Status = r.Status
		out.Error.Reason = r.Reason
		out.Error.Message = r.Err.Error()
		if out.Error.Reason == "" {
			out.Error.Reason = r.Err.Error()
		}
		if trace != nil && len(trace.Profiles) > 0 {
			out.Trace = trace
		}
		return c.writeJSON(out, exitFail)
	}
	if trace != nil && len(trace.Profiles) > 0 {
		fmt.Fprintf(c.stdout, "%s\n", trace)
	}
	fmt.Fprintf(c.stdout, "rejected: %d %s\n", r.Status, strings.TrimSpace(r.Reason+" "+errText(r)))
	return exitFail
}

func errText(r *requestcontrol.Rejection) string {
	if r.Err == nil {
		return ""
	}
	if r.Reason != "" {
		return "(" + r.Err.Error() + ")"
	}
	return r.Err.Error()
}

func (c *cli) writeJSON(v any, code int) int {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return c.fail("%v", err)
	}
	return code
}

func compact(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		s, _ := json.Marshal(string(b))
		return s
	}
	return buf.Bytes()
}

//go:embed demo
var demo embed.FS

// readInput returns the named file's content, or the embedded demo file when
// file is empty.
func readInput(file, embedded string) (string, []byte, error) {
	if file == "" {
		data, err := demo.ReadFile(embedded)
		return "(embedded " + embedded + ")", data, err
	}
	data, err := os.ReadFile(file)
	return file, data, err
}

// endpointsFile is the --endpoints format.
type endpointsFile struct {
	Endpoints []endpointSpec `yaml:"endpoints"`
}

type endpointSpec struct {
	Name    string            `yaml:"name"`
	Address string            `yaml:"address"`
	Port    int               `yaml:"port"`
	Rank    int               `yaml:"rank"`
	Labels  map[string]string `yaml:"labels"`
	Metrics *struct {
		Waiting   int     `yaml:"waiting"`
		Running   int     `yaml:"running"`
		KVUsage   float64 `yaml:"kvUsage"`
		BlockSize int     `yaml:"blockSize"`
		GPUBlocks int     `yaml:"gpuBlocks"`
		LoRA      struct {
			Active  []string `yaml:"active"`
			Waiting []string `yaml:"waiting"`
			Max     int      `yaml:"max"`
		} `yaml:"lora"`
	} `yaml:"metrics"`
}

// loadEndpoints reads an endpoints file strictly. An endpoint with metrics
// counts as scraped at now; one without has never been scraped.
func loadEndpoints(file string, data []byte, now time.Time) ([]*datalayer.Endpoint, error) {
	var f endpointsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var errs []error
	seen := map[string]int{}
	var eps []*datalayer.Endpoint
	for i, s := range f.Endpoints {
		at := fmt.Sprintf("%s: endpoints[%d]", file, i)
		if s.Address == "" {
			errs = append(errs, fmt.Errorf("%s.address: missing", at))
			continue
		}
		if s.Port < 1 || s.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s.port: want 1..65535, got %d", at, s.Port))
			continue
		}
		e := datalayer.New(s.Name, s.Address, s.Port, s.Labels)
		if e.Name == "" {
			e = datalayer.New(e.HostPort(), s.Address, s.Port, s.Labels)
		}
		e.Rank = s.Rank
		if first, dup := seen[e.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: duplicate endpoint %q (also endpoints[%d])", at, e.Name, first))
			continue
		}
		seen[e.Name] = i
		if m := s.Metrics; m != nil {
			e = e.WithMetrics(datalayer.Metrics{
				Waiting: m.Waiting, Running: m.Running, KVUsage: m.KVUsage,
				LoRA:      datalayer.LoRA{Active: m.LoRA.Active, Waiting: m.LoRA.Waiting, Max: m.LoRA.Max},
				BlockSize: m.BlockSize, GPUBlocks: m.GPUBlocks, UpdateTime: now,
			})
		}
		eps = append(eps, e)
	}
	return eps, errors.Join(errs...)
}
