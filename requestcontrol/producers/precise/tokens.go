package precise

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/scheduling"
)

// Tokenizer turns a request into the token ids the engine will see (chat
// template applied). Tokenize is called from Produce, concurrently for
// different requests, for requests that carry no token ids; it must honour
// ctx and must not keep or modify body. model is the model the request is
// served as (after rewrites).
type Tokenizer interface {
	Tokenize(ctx context.Context, model string, body *parsers.Body) ([]uint32, error)
}

// TokenizerFunc adapts a function to Tokenizer.
type TokenizerFunc func(ctx context.Context, model string, body *parsers.Body) ([]uint32, error)

// Tokenize calls f.
func (f TokenizerFunc) Tokenize(ctx context.Context, model string, body *parsers.Body) ([]uint32, error) {
	return f(ctx, model, body)
}

// The engines' render endpoints: the prompt as the engine would tokenize
// it, without running the model.
const (
	ChatRenderPath       = "/v1/chat/completions/render"
	CompletionRenderPath = "/v1/completions/render"
	maxRenderResponse    = 64 << 20
)

// renderClient asks an engine's render endpoint for a request's token ids,
// with a timeout and a cache keyed by the body.
type renderClient struct {
	client  *http.Client
	scheme  string
	timeout time.Duration
	cache   *tokenCache
}

func newRenderClient(cfg RenderConfig) *renderClient {
	return &renderClient{
		client:  &http.Client{},
		scheme:  cfg.Scheme,
		timeout: time.Duration(cfg.Timeout),
		cache:   newTokenCache(cfg.CacheSize),
	}
}

// renderPath returns the render endpoint for a body's API.
func renderPath(api string) (string, bool) {
	switch api {
	case "chat/completions", "chat/completions/render":
		return ChatRenderPath, true
	case "completions", "completions/render":
		return CompletionRenderPath, true
	}
	return "", false
}

// tokens renders body on the first candidate endpoint.
func (r *renderClient) tokens(ctx context.Context, eps []*scheduling.Endpoint, body *parsers.Body) ([]uint32, error) {
	path, ok := renderPath(body.API)
	if !ok {
		return nil, fmt.Errorf("no render endpoint for API %q", body.API)
	}
	if len(body.Raw) == 0 {
		return nil, errors.New("the request body is not available")
	}
	key := xxhash.Sum64String(path) ^ xxhash.Sum64(body.Raw)
	if toks, ok := r.cache.get(key); ok {
		return toks, nil
	}
	if len(eps) == 0 {
		return nil, errors.New("no endpoint to render on")
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	url := r.scheme + "://" + eps[0].HostPort() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body.Raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRenderResponse+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d: %.200s", url, resp.StatusCode, data)
	}
	if len(data) > maxRenderResponse {
		return nil, fmt.Errorf("%s: response larger than %d bytes", url, maxRenderResponse)
	}
	toks, err := renderedTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	r.cache.put(key, toks)
	return toks, nil
}

// renderedTokens finds the token ids in a render response. Engines answer
// {"token_ids": [...]} (newer vLLM), [conversation, [{"prompt_token_ids":
// [...]}, ...]] (older vLLM chat) or a list of such objects (completions):
// the first "token_ids" or "prompt_token_ids" array in document order wins.
func renderedTokens(data []byte) ([]uint32, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("render response: %w", err)
	}
	toks, ok, err := findTokens(doc, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("render response has no token_ids")
	}
	return toks, nil
}

func findTokens(v any, depth int) ([]uint32, bool, error) {
	if depth > 8 {
		return nil, false, nil
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"token_ids", "prompt_token_ids"} {
			if arr, ok := v[k].([]any); ok {
				toks, err := tokenArray(arr)
				return toks, true, err
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if toks, ok, err := findTokens(v[k], depth+1); ok || err != nil {
				return toks, ok, err
			}
		}
	case []any:
		for _, e := range v {
			if toks, ok, err := findTokens(e, depth+1); ok || err != nil {
				return toks, ok, err
			}
		}
	}
	return nil, false, nil
}

func tokenArray(arr []any) ([]uint32, error) {
	toks := make([]uint32, len(arr))
	for i, e := range arr {
		n, ok := e.(json.Number)
		if !ok {
			return nil, fmt.Errorf("token_ids[%d] is not a number", i)
		}
		v, err := n.Int64()
		if err != nil || v < 0 || v > 1<<32-1 {
			return nil, fmt.Errorf("token_ids[%d] = %s is not a token id", i, n)
		}
		toks[i] = uint32(v)
	}
	return toks, nil
}

// tokenCache is a small LRU of rendered token ids.
type tokenCache struct {
	mu    sync.Mutex
	size  int
	items map[uint64]*list.Element
	order list.List // front = most recent; values are cacheEntry
}

type cacheEntry struct {
	key  uint64
	toks []uint32
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{size: size, items: map[uint64]*list.Element{}}
}

func (c *tokenCache) get(key uint64) ([]uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(cacheEntry).toks, true
}

func (c *tokenCache) put(key uint64, toks []uint32) {
	if c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value = cacheEntry{key, toks}
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(cacheEntry{key, toks})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(cacheEntry).key)
	}
}
