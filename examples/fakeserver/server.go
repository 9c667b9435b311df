package fakeserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
)

// HeaderServedBy is the response header naming the server that answered,
// as host:port.
const HeaderServedBy = "x-served-by"

// Config configures a fake model server. The zero value is a fast server
// with no simulated latency; Defaults fill the rest.
type Config struct {
	// Model is the base model served (default "fake-model"). Any other
	// model name is served as a LoRA adapter, loaded into a free slot.
	Model string
	// LoRAs are adapters loaded at start.
	LoRAs []string
	// MaxLoRAs is the number of adapter slots (default 4): loading an
	// adapter into a full set evicts the least recently used idle one (when
	// every adapter is busy the set grows: the fake does not queue for a
	// slot).
	MaxLoRAs int
	// MaxRunning is the size of the continuous batch: requests beyond it
	// wait in the queue (default 256).
	MaxRunning int
	// BlockSize is the KV-cache block size in tokens (default 16).
	BlockSize int
	// KVBlocks is the KV-cache size in blocks (default 8192).
	KVBlocks int
	// PrefillPerToken is the prefill time of one uncached prompt token;
	// cached prefix blocks skip it.
	PrefillPerToken time.Duration
	// DecodePerToken is the time to generate one output token.
	DecodePerToken time.Duration
	// OutputTokens is the completion length when the request sets no
	// max_tokens (default 16).
	OutputTokens int
	// MaxBodyBytes bounds request bodies (default 32 MiB).
	MaxBodyBytes int64
	// KVEvents, when set, publishes KV-cache events.
	KVEvents *KVEvents
	// Logger receives the server's warnings; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "fake-model"
	}
	if c.MaxLoRAs <= 0 {
		c.MaxLoRAs = 4
	}
	if c.MaxRunning <= 0 {
		c.MaxRunning = 256
	}
	if c.BlockSize <= 0 {
		c.BlockSize = 16
	}
	if c.KVBlocks <= 0 {
		c.KVBlocks = 8192
	}
	if c.OutputTokens <= 0 {
		c.OutputTokens = 16
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 32 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Server is one fake OpenAI-compatible model server (SPEC §8): completions
// and chat completions (streaming too, with stream_options.include_usage),
// /v1/models, the render endpoints, and /metrics in vLLM's names reflecting
// the simulated state. Every response carries x-served-by: host:port.
type Server struct {
	cfg   Config
	eng   *engine
	name  string // host:port
	ln    net.Listener
	http  *http.Server
	pub   *publisher
	start time.Time
	ids   atomic.Uint64

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// Start listens on addr ("127.0.0.1:0" picks a free port) and serves until
// Close.
func Start(cfg Config, addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakeserver: %w", err)
	}
	return Serve(cfg, ln)
}

// Serve serves on ln until Close.
func Serve(cfg Config, ln net.Listener) (*Server, error) {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, eng: newEngine(cfg), name: ln.Addr().String(), ln: ln, start: time.Now(), done: make(chan struct{})}
	s.eng.mu.Lock()
	for _, l := range cfg.LoRAs {
		s.eng.adapter(l)
	}
	s.eng.mu.Unlock()
	if cfg.KVEvents != nil {
		pub, err := startPublisher(*cfg.KVEvents, "kv@"+s.name+"@"+cfg.Model, s.eng, cfg.Logger)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.pub = pub
	}
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.name }

// URL returns "http://host:port".
func (s *Server) URL() string { return "http://" + s.name }

// Close stops the server at once: open connections are closed, so requests
// in flight fail as with a crashed engine.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.http.Close()
		<-s.done
		if s.pub != nil {
			s.closeErr = errors.Join(s.closeErr, s.pub.close())
		}
	})
	return s.closeErr
}

// Stats are a server's counters.
type Stats struct {
	Requests     uint64 // requests admitted to the queue
	PromptTokens uint64 // prompt tokens looked up in the prefix cache
	CachedTokens uint64 // of which were cached
	Waiting      int
	Running      int
	KVUsage      float64
	CachedBlocks int
	EventBatches uint64 // KV-event messages sent
}

// Stats returns the server's counters and state.
func (s *Server) Stats() Stats {
	st := s.eng.state()
	out := Stats{Requests: s.eng.requests.Load(), PromptTokens: s.eng.queries.Load(), CachedTokens: s.eng.hits.Load(),
		Waiting: st.waiting, Running: st.running, KVUsage: st.kvUsage, CachedBlocks: st.cachedBlocks}
	if s.pub != nil {
		out.EventBatches = s.pub.sent.Load()
	}
	return out
}

// ClearCache drops the prefix cache and publishes AllBlocksCleared.
func (s *Server) ClearCache() { s.eng.clearCache() }

// ServeHTTP routes the OpenAI-compatible API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderServedBy, s.name)
	switch path := r.URL.Path; {
	case path == "/metrics":
		s.metrics(w)
	case path == "/health" || path == "/healthz":
		w.WriteHeader(http.StatusOK)
	case path == "/v1/models":
		s.models(w)
	case strings.HasSuffix(path, "/completions/render"):
		s.render(w, r, strings.HasSuffix(path, "chat/completions/render"))
	case strings.HasSuffix(path, "/chat/completions"):
		s.generate(w, r, true)
	case strings.HasSuffix(path, "/completions"):
		s.generate(w, r, false)
	default:
		writeError(w, http.StatusNotFound, "NotFoundError", "no route for "+path)
	}
}

// decode reads the request body, parses it with the OpenAI parser of the
// picker's own library, and returns it with its prompt tokens.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, chat bool) (*parsers.Body, []uint32, bool) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "BadRequestError", "use POST")
		return nil, nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "read body: "+err.Error())
		return nil, nil, false
	}
	api := "completions"
	if chat {
		api = "chat/completions"
	}
	req, err := (&openai.Parser{}).ParseRequest(api, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return nil, nil, false
	}
	switch {
	case chat && len(req.Messages) == 0:
		writeError(w, http.StatusBadRequest, "BadRequestError", "messages: required")
		return nil, nil, false
	case chat:
		msgs := make([]Message, len(req.Messages))
		for i, m := range req.Messages {
			msgs[i] = Message{Role: m.Role, Content: m.Content}
		}
		return req, RenderChat(nil, msgs), true
	case len(req.TokenIDs) > 0:
		return req, req.TokenIDs, true
	}
	return req, Tokenize([]uint32{tokenBOS}, req.Prompt), true
}

// generate serves a completion or chat completion.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	req, tokens, ok := s.decode(w, r, chat)
	if !ok {
		return
	}
	maxTokens := s.cfg.OutputTokens
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	ctx := r.Context()
	j, err := s.eng.admit(ctx, req.Model)
	if err != nil {
		return // the client went away while queued
	}
	defer j.done()
	cached := j.prefill(tokens, maxTokens)
	if sleep(ctx, time.Duration(len(tokens)-cached)*s.cfg.PrefillPerToken) != nil {
		return
	}
	g := &generation{s: s, req: req, chat: chat, id: s.nextID(chat), created: time.Now().Unix(),
		usage: usage{PromptTokens: len(tokens), CompletionTokens: maxTokens, TotalTokens: len(tokens) + maxTokens,
			Details: &usageDetails{CachedTokens: cached}}}
	if req.Stream {
		g.stream(ctx, w, maxTokens)
		return
	}
	if sleep(ctx, time.Duration(maxTokens)*s.cfg.DecodePerToken) != nil {
		return
	}
	writeJSON(w, http.StatusOK, g.whole(maxTokens))
}

func (s *Server) nextID(chat bool) string {
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	return prefix + strconv.FormatUint(s.ids.Add(1), 10)
}

// generation is one response being produced.
type generation struct {
	s       *Server
	req     *parsers.Body
	chat    bool
	id      string
	created int64
	usage   usage
}

type usage struct {
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	TotalTokens      int           `json:"total_tokens"`
	Details          *usageDetails `json:"prompt_tokens_details,omitempty"`
}

type usageDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type choice struct {
	Index        int          `json:"index"`
	Text         *string      `json:"text,omitempty"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type chatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type response struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
}

func (g *generation) whole(n int) response {
	text := string(outputText(nil, 0, n))
	stop := "length"
	c := choice{FinishReason: &stop}
	obj := "text_completion"
	if g.chat {
		obj = "chat.completion"
		c.Message = &chatMessage{Role: "assistant", Content: &text}
	} else {
		c.Text = &text
	}
	return response{ID: g.id, Object: obj, Created: g.created, Model: g.req.Model, Choices: []choice{c}, Usage: &g.usage}
}

// chunk returns a stream chunk carrying text (nil: the role-only first chat
// chunk) and, on the last, the finish reason.
func (g *generation) chunk(text *string, finish *string) response {
	c := choice{FinishReason: finish}
	obj := "text_completion"
	if g.chat {
		obj = "chat.completion.chunk"
		c.Delta = &chatMessage{Content: text}
		if text == nil && finish == nil {
			empty := ""
			c.Delta = &chatMessage{Role: "assistant", Content: &empty}
		}
	} else {
		if text == nil {
			empty := ""
			text = &empty
		}
		c.Text = text
	}
	return response{ID: g.id, Object: obj, Created: g.created, Model: g.req.Model, Choices: []choice{c}}
}

// stream writes the response as server-sent events, one token per event,
// flushed as generated.
func (g *generation) stream(ctx context.Context, w http.ResponseWriter, n int) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		buf := make([]byte, 0, len(b)+8)
		buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if g.chat && !send(g.chunk(nil, nil)) {
		return
	}
	for i := range n {
		if i > 0 && sleep(ctx, g.s.cfg.DecodePerToken) != nil {
			return
		}
		text := string(outputText(nil, i, i+1))
		var finish *string
		if i == n-1 {
			stop := "length"
			finish = &stop
		}
		if !send(g.chunk(&text, finish)) {
			return
		}
	}
	if g.req.IncludeUsage {
		obj := "text_completion"
		if g.chat {
			obj = "chat.completion.chunk"
		}
		if !send(response{ID: g.id, Object: obj, Created: g.created, Model: g.req.Model, Choices: []choice{}, Usage: &g.usage}) {
			return
		}
	}
	if _, err := io.WriteString(w, "data: [DONE]\n\n"); err == nil {
		_ = rc.Flush()
	}
}

// render answers the render endpoints with vLLM's GenerateRequest shape: the
// token ids the server would prefill.
func (s *Server) render(w http.ResponseWriter, r *http.Request, chat bool) {
	req, tokens, ok := s.decode(w, r, chat)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"request_id": s.nextID(chat),
		"model":      req.Model,
		"token_ids":  tokens,
		"features":   nil,
	})
}

func (s *Server) models(w http.ResponseWriter) {
	type model struct {
		ID      string  `json:"id"`
		Object  string  `json:"object"`
		Created int64   `json:"created"`
		OwnedBy string  `json:"owned_by"`
		Root    string  `json:"root"`
		Parent  *string `json:"parent"`
	}
	created := s.start.Unix()
	data := []model{{ID: s.cfg.Model, Object: "model", Created: created, OwnedBy: "fakeserver", Root: s.cfg.Model}}
	for _, l := range s.eng.state().runningLoRAs {
		base := s.cfg.Model
		data = append(data, model{ID: l, Object: "model", Created: created, OwnedBy: "fakeserver", Root: l, Parent: &base})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// metrics writes the Prometheus text exposition in vLLM's metric names.
func (s *Server) metrics(w http.ResponseWriter) {
	st := s.eng.state()
	m := strconv.Quote(s.cfg.Model)
	var b strings.Builder
	gauge := func(name, help, labels string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %s\n", name, help, name, name, labels,
			strconv.FormatFloat(v, 'g', -1, 64))
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s{model_name=%s} %d\n", name, help, name, name, m, v)
	}
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "model_name="+m, float64(st.waiting))
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", "model_name="+m, float64(st.running))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "model_name="+m, st.kvUsage)
	gauge("vllm:lora_requests_info", "Running stats on lora requests.",
		fmt.Sprintf("max_lora=%q,running_lora_adapters=%q,waiting_lora_adapters=%q",
			strconv.Itoa(s.cfg.MaxLoRAs), joinNames(st.runningLoRAs), joinNames(st.waitingLoRAs)),
		float64(time.Now().UnixNano())/1e9)
	gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig.",
		fmt.Sprintf("block_size=%q,enable_prefix_caching=\"True\",num_gpu_blocks=%q",
			strconv.Itoa(s.cfg.BlockSize), strconv.Itoa(s.cfg.KVBlocks)), 1)
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", s.eng.queries.Load())
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", s.eng.hits.Load())
	counter("vllm:request_success_total", "Count of requests admitted.", s.eng.requests.Load())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encode"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError writes an OpenAI-style error.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}
