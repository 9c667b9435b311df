package requestcontrol_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"testing"

	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/requestcontrol"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
)

// FuzzResponseStream feeds arbitrary response bytes, cut into chunks of any
// size, through an Exchange that rewrites the model name back: it never
// panics, and the client receives exactly what rewriting the whole stream
// line by line gives (streaming) or the whole body at once (not streaming),
// whatever the chunk boundaries.
func FuzzResponseStream(f *testing.F) {
	f.Add(rt.SSE(`{"model":"t","choices":[{"delta":{"content":"x"}}]}`, `{"model":"t","usage":{"prompt_tokens":1}}`), uint8(3), true)
	f.Add("event: message_start\ndata: {\"message\":{\"model\":\"t\",\"usage\":{\"input_tokens\":5}}}\n\n", uint8(1), true)
	f.Add(`{"model":"t","usage":{"prompt_tokens":2,"completion_tokens":3}}`, uint8(4), false)
	f.Add("data: {\"model\":\"t\"", uint8(2), true)
	d := rt.NewDirector(f, rt.Config{})
	d.Logger = slog.New(slog.DiscardHandler) // the fuzz target may not log to f
	f.Fuzz(func(t *testing.T, stream string, size uint8, sse bool) {
		n := int(size%64) + 1
		in := rt.Chat("client", "x", requestcontrol.HeaderModelRewrite, "t")
		x, err := d.HandleRequest(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close(nil)
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		x.ResponseHeaders("", 200, http.Header{"Content-Type": {ct}})
		var got []byte
		chunks := rt.Split(stream, n)
		for i, c := range chunks {
			got = append(got, x.ResponseBody(c, i == len(chunks)-1)...)
		}
		var want []byte
		if sse {
			rest := []byte(stream)
			for len(rest) > 0 {
				i := bytes.IndexByte(rest, '\n') + 1
				if i == 0 {
					i = len(rest)
				}
				want = parsers.AppendReplaceModel(want, rest[:i], "t", "client")
				rest = rest[i:]
			}
		} else {
			want = parsers.ReplaceModel([]byte(stream), "t", "client")
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chunks of %d:\n got %q\nwant %q", n, got, want)
		}
		if u := x.Usage(); u.PromptTokens < 0 || u.CompletionTokens < 0 {
			t.Fatalf("usage %+v", u)
		}
	})
}
