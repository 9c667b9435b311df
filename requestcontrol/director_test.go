package requestcontrol_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/eppkit/eppkit/datalayer"
	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/requestcontrol"
	rt "github.com/eppkit/eppkit/requestcontrol/requestcontroltest"
	"github.com/eppkit/eppkit/scheduling"
)

var kCount = plugins.NewKey[int]("count")

// counter produces kCount = number of candidates, or fails.
type counter struct{ fail bool }

func (c *counter) Produces() []plugins.AnyKey { return []plugins.AnyKey{kCount} }
func (c *counter) Produce(_ context.Context, r *scheduling.Request, e []*scheduling.Endpoint) error {
	plugins.Set(&r.Data, kCount, len(e))
	if c.fail {
		return errors.New("tokenizer down")
	}
	return nil
}

type recorder struct{ got []string }

func (r *recorder) PreRequest(_ context.Context, _ *scheduling.Request, res *scheduling.Result) {
	r.got = append(r.got, res.PrimaryResult().Endpoints[0].Name)
}

func director(t *testing.T, prod *counter, pre *recorder, seen *int, filterAll bool) *requestcontrol.Director {
	t.Helper()
	scorer := scheduling.ScorerFunc(func(_ context.Context, r *scheduling.Request, e []*scheduling.Endpoint, s []float64) {
		n, ok := plugins.Get(&r.Data, kCount)
		if !ok {
			n = -1
		}
		*seen = n
	})
	pickAll := scheduling.PickerFunc(func(_ context.Context, _ *scheduling.Request, e []*scheduling.Endpoint, _ []float64) []*scheduling.Endpoint {
		return e
	})
	p := &scheduling.Profile{Name: "default", Picker: pickAll, Scorers: []scheduling.WeightedScorer{{Weight: 1, Scorer: scorer}}}
	if filterAll {
		p.Filters = []scheduling.NamedFilter{{Name: "none", Filter: scheduling.FilterFunc(
			func(context.Context, *scheduling.Request, []*scheduling.Endpoint) []*scheduling.Endpoint { return nil })}}
	}
	s, err := scheduling.New(scheduling.ProfileHandlerFunc(func(ctx context.Context, _ *scheduling.Request, n []string, run scheduling.RunProfileFunc) (string, error) {
		_, err := run(ctx, n[0])
		return n[0], err
	}), p)
	if err != nil {
		t.Fatal(err)
	}
	return &requestcontrol.Director{
		Producers:   []requestcontrol.Named[requestcontrol.DataProducer]{{Name: "counter", Plugin: prod}},
		Scheduler:   s,
		PreRequests: []requestcontrol.Named[requestcontrol.PreRequest]{{Name: "rec", Plugin: pre}},
	}
}

func endpoints() []*scheduling.Endpoint {
	m := datalayer.Metrics{UpdateTime: time.Unix(1, 0)}
	return []*scheduling.Endpoint{
		datalayer.New("a", "10.0.0.1", 8000, nil).WithMetrics(m),
		datalayer.New("b", "fd00::2", 8001, nil).WithMetrics(m),
	}
}

func TestDirectorRunsStagesInOrder(t *testing.T) {
	pre, seen := &recorder{}, 0
	d := director(t, &counter{}, pre, &seen, false)
	dec, err := d.Schedule(context.Background(), &scheduling.Request{}, endpoints())
	if err != nil {
		t.Fatal(err)
	}
	if seen != 2 {
		t.Fatalf("scorer saw count %d, want 2", seen)
	}
	if dec.Header() != "10.0.0.1:8000,[fd00::2]:8001" {
		t.Fatalf("header %q", dec.Header())
	}
	if len(pre.got) != 1 || pre.got[0] != "a" {
		t.Fatalf("pre-request saw %v", pre.got)
	}
}

func TestFailedProducerLeavesNoData(t *testing.T) {
	seen := 0
	d := director(t, &counter{fail: true}, &recorder{}, &seen, false)
	if _, err := d.Schedule(context.Background(), &scheduling.Request{}, endpoints()); err != nil {
		t.Fatal(err)
	}
	if seen != -1 {
		t.Fatalf("consumer saw %d from a failed producer, want no data", seen)
	}
}

func TestRejections(t *testing.T) {
	seen := 0
	pre := &recorder{}
	d := director(t, &counter{}, pre, &seen, true)
	_, err := d.Schedule(context.Background(), &scheduling.Request{}, endpoints())
	var rej *requestcontrol.Rejection
	if !errors.As(err, &rej) || rej.Status != http.StatusTooManyRequests || rej.Reason != requestcontrol.ReasonSaturated {
		t.Fatalf("all filtered: %v", err)
	}
	_, err = d.Schedule(context.Background(), &scheduling.Request{}, nil)
	if !errors.As(err, &rej) || rej.Status != http.StatusServiceUnavailable || rej.Reason != requestcontrol.ReasonNoEndpoints {
		t.Fatalf("no candidates: %v", err)
	}
	if len(pre.got) != 0 {
		t.Fatal("pre-request ran for a rejected request")
	}
	if r := requestcontrol.Reject(errors.New("x")); r.Status != 500 {
		t.Fatalf("generic error → %d", r.Status)
	}
}

func TestRecord(t *testing.T) {
	pre, seen := &recorder{}, 0
	d := director(t, &counter{}, pre, &seen, false)
	eps := endpoints()
	if err := d.Record(context.Background(), &scheduling.Request{}, eps, eps[1]); err != nil {
		t.Fatal(err)
	}
	if len(pre.got) != 1 || pre.got[0] != "b" {
		t.Fatalf("pre-request saw %v", pre.got)
	}
	if seen != 0 {
		t.Fatal("Record ran the scheduler")
	}
	stranger := datalayer.New("z", "10.9.9.9", 1, nil)
	if err := d.Record(context.Background(), &scheduling.Request{}, eps, stranger); err == nil {
		t.Fatal("recorded a pick outside the candidates")
	}
}

// HandleRequest is Parse then Handle: a caller may split them (the
// simulator parses ahead), and a rejection counts once in either stage.
func TestParseThenHandle(t *testing.T) {
	d := rt.NewDirector(t, rt.Config{})
	p, err := d.Parse(ctx, rt.Chat("m", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := d.Handle(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	x.Close(nil)
	if len(x.Decision.Endpoints) == 0 {
		t.Fatal("no pick")
	}
	if _, err := d.Parse(ctx, rt.Request("/v1/chat/completions", `{"model":`)); err == nil {
		t.Fatal("a truncated body parsed")
	} else if rej := requestcontrol.Reject(err); rej.Status != 400 {
		t.Fatalf("status %d, want 400", rej.Status)
	}
	if s := d.Stats(); s.Rejected != 1 {
		t.Fatalf("rejected %d, want 1", s.Rejected)
	}
}
