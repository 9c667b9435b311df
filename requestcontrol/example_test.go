package requestcontrol_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/parsers"
	"github.com/eppkit/eppkit/parsers/openai"
	"github.com/eppkit/eppkit/requestcontrol"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/pickers"
	"github.com/eppkit/eppkit/scheduling/scorers"
)

// A Director takes a request from its raw body to the pick, and its
// response back to the client with the model name the client asked for.
func ExampleDirector_HandleRequest() {
	sched, _ := scheduling.New(scheduling.ProfileHandlerFunc(
		func(ctx context.Context, _ *scheduling.Request, names []string, run scheduling.RunProfileFunc) (string, error) {
			_, err := run(ctx, names[0])
			return names[0], err
		}),
		&scheduling.Profile{Name: "default", Picker: &pickers.MaxScore{},
			Scorers: []scheduling.WeightedScorer{{Name: "queue", Scorer: &scorers.Queue{}, Weight: 1}}})
	now := time.Now()
	busy := datalayer.New("busy", "10.0.0.1", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 9, UpdateTime: now})
	idle := datalayer.New("idle", "10.0.0.2", 8000, nil).WithMetrics(datalayer.Metrics{Waiting: 0, UpdateTime: now})
	d := &requestcontrol.Director{
		Scheduler: sched,
		Parsers:   parsers.NewSelector(&openai.Parser{}),
		Pool:      requestcontrol.StaticPool{busy, idle},
	}
	rw, _ := requestcontrol.NewModelRewrites(requestcontrol.ModelRewrite{Rules: []requestcontrol.RewriteRule{{
		Models: []string{"llama3"}, Targets: []requestcontrol.RewriteTarget{{Model: "llama3-canary"}}}}})
	d.SetModelRewrites(rw)

	x, err := d.HandleRequest(context.Background(), &requestcontrol.Inbound{
		Path: "/v1/chat/completions",
		Body: []byte(`{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close(nil)
	fmt.Println(x.Headers[requestcontrol.HeaderDestination])
	fmt.Println(string(x.Body))

	x.ResponseHeaders("", 200, http.Header{"Content-Type": {"application/json"}})
	out := x.ResponseBody([]byte(`{"model":"llama3-canary","usage":{"prompt_tokens":9,"completion_tokens":1}}`), true)
	fmt.Println(string(out))
	fmt.Printf("%+v\n", x.Usage())
	// Output:
	// 10.0.0.2:8000
	// {"model":"llama3-canary","messages":[{"role":"user","content":"hi"}]}
	// {"model":"llama3","usage":{"prompt_tokens":9,"completion_tokens":1}}
	// {PromptTokens:9 CompletionTokens:1 CachedTokens:0}
}

// Sheddable requests are refused while the pool is saturated.
func ExampleSaturationAdmitter() {
	gate := &requestcontrol.SaturationAdmitter{Detector: fixed(1.2)}
	for _, prio := range []int{-1, 0} {
		err := gate.Admit(context.Background(), &scheduling.Request{Priority: prio}, nil)
		fmt.Println(prio, err)
	}
	// Output:
	// -1 429 rejected-saturated: system saturated, sheddable request dropped
	// 0 <nil>
}

type fixed float64

func (f fixed) Saturation(context.Context, []*datalayer.Endpoint) float64 { return float64(f) }
