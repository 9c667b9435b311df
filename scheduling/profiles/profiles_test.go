package profiles_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/plugins/pluginstest"
	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/profiles"
	. "github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// recorder is a RunProfileFunc that records the profiles it ran.
type recorder struct {
	ran []string
	err error
}

func (r *recorder) run(_ context.Context, name string) (scheduling.ProfileResult, error) {
	r.ran = append(r.ran, name)
	return scheduling.ProfileResult{Profile: name}, r.err
}

func TestSingleProfile(t *testing.T) {
	h := &profiles.SingleProfile{}
	var r recorder
	primary, err := h.Handle(context.Background(), Req("m").Build(), []string{"default"}, r.run)
	if err != nil || primary != "default" || !slices.Equal(r.ran, []string{"default"}) {
		t.Errorf("Handle = %q, %v; ran %v", primary, err, r.ran)
	}

	for _, configured := range [][]string{nil, {"a", "b"}} {
		var r recorder
		_, err := h.Handle(context.Background(), Req("m").Build(), configured, r.run)
		if err == nil || !strings.Contains(err.Error(), "single-profile-handler") || len(r.ran) != 0 {
			t.Errorf("profiles %v: err %v, ran %v; want an error and nothing run", configured, err, r.ran)
		}
		if err := h.CheckProfiles(configured); err == nil {
			t.Errorf("CheckProfiles(%v) = nil", configured)
		}
	}

	r = recorder{err: scheduling.ErrAllFiltered}
	if _, err := h.Handle(context.Background(), Req("m").Build(), []string{"default"}, r.run); !errors.Is(err, scheduling.ErrAllFiltered) {
		t.Errorf("run error not returned: %v", err)
	}
}

func TestHeaderProfile(t *testing.T) {
	configured := []string{"prefill", "decode"}
	cases := []struct {
		name     string
		h        profiles.HeaderProfile
		req      *scheduling.Request
		want     string
		wantErr  string
		wantUnkn bool
	}{
		{name: "header", h: profiles.HeaderProfile{Header: "x-llm-d-profile"}, req: Req("m").Header("X-LLM-D-Profile", "decode").Build(), want: "decode"},
		{name: "header trimmed", h: profiles.HeaderProfile{Header: "x-llm-d-profile"}, req: Req("m").Header("x-llm-d-profile", " prefill ").Build(), want: "prefill"},
		{name: "custom header, mixed case", h: profiles.HeaderProfile{Header: "X-Policy"}, req: Req("m").Header("x-policy", "prefill").Build(), want: "prefill"},
		{name: "zero value reads the default header", req: Req("m").Header("x-llm-d-profile", "decode").Build(), want: "decode"},
		{name: "missing, default", h: profiles.HeaderProfile{Header: "x-llm-d-profile", DefaultProfile: "decode"}, req: Req("m").Build(), want: "decode"},
		{name: "empty, default", h: profiles.HeaderProfile{DefaultProfile: "decode"}, req: Req("m").Header("x-llm-d-profile", "").Build(), want: "decode"},
		{
			name:    "missing, no default",
			h:       profiles.HeaderProfile{Header: "x-llm-d-profile"},
			req:     Req("m").Build(),
			wantErr: "request has no x-llm-d-profile header and no defaultProfile is configured (profiles: prefill, decode)",
		},
		{
			name:     "unknown",
			h:        profiles.HeaderProfile{DefaultProfile: "decode"},
			req:      Req("m").Header("x-llm-d-profile", "fast").Build(),
			wantErr:  `header x-llm-d-profile: scheduling: unknown profile "fast" (configured: prefill, decode)`,
			wantUnkn: true,
		},
		{
			name:     "unknown default",
			h:        profiles.HeaderProfile{DefaultProfile: "gone"},
			req:      Req("m").Build(),
			wantErr:  `defaultProfile: scheduling: unknown profile "gone"`,
			wantUnkn: true,
		},
		{name: "nil headers", h: profiles.HeaderProfile{DefaultProfile: "prefill"}, req: &scheduling.Request{}, want: "prefill"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			primary, err := tc.h.Handle(context.Background(), tc.req, configured, r.run)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if errors.Is(err, scheduling.ErrUnknownProfile) != tc.wantUnkn {
					t.Errorf("errors.Is(err, ErrUnknownProfile) = %v, want %v", !tc.wantUnkn, tc.wantUnkn)
				}
				if len(r.ran) != 0 {
					t.Errorf("ran %v after an error", r.ran)
				}
				return
			}
			if err != nil || primary != tc.want || !slices.Equal(r.ran, []string{tc.want}) {
				t.Errorf("Handle = %q, %v; ran %v; want %q", primary, err, r.ran, tc.want)
			}
		})
	}
}

func TestHeaderProfileParameters(t *testing.T) {
	reg := plugins.NewRegistry()
	plugins.Register[*profiles.HeaderProfile](reg, "header-profile-handler")
	h := pluginstest.Build[*profiles.HeaderProfile](t, reg, "header-profile-handler", "")
	if h.Header != "x-llm-d-profile" || h.DefaultProfile != "" {
		t.Errorf("defaults = %+v", h)
	}
	if _, err := reg.Build("header-profile-handler", "h", []byte(`{"header": " "}`)); err == nil {
		t.Error("blank header accepted")
	}
	h = pluginstest.Build[*profiles.HeaderProfile](t, reg, "header-profile-handler", `{"defaultProfile": "decode"}`)
	if err := h.CheckProfiles([]string{"prefill"}); !errors.Is(err, scheduling.ErrUnknownProfile) {
		t.Errorf("CheckProfiles with a missing default: %v", err)
	}
	if err := h.CheckProfiles([]string{"prefill", "decode"}); err != nil {
		t.Errorf("CheckProfiles: %v", err)
	}
}

// TestWithScheduler runs the handlers inside a real Scheduler.
func TestWithScheduler(t *testing.T) {
	eps := Eps(Ep("a").Label("role", "prefill"), Ep("b").Label("role", "decode"))
	prefill := Profile("prefill").Scorer(ScoreByName{"a": 1}, 1).Build()
	decode := Profile("decode").Scorer(ScoreByName{"b": 1}, 1).Build()
	s, err := scheduling.New(&profiles.HeaderProfile{DefaultProfile: "decode"}, prefill, decode)
	if err != nil {
		t.Fatal(err)
	}
	for hdr, want := range map[string]string{"prefill": "a", "decode": "b", "": "b"} {
		res, err := s.Schedule(context.Background(), Req("m").Header("x-llm-d-profile", hdr).Build(), eps)
		if err != nil {
			t.Fatalf("header %q: %v", hdr, err)
		}
		if got := res.PrimaryResult().Endpoints[0].Name; got != want || len(res.Profiles) != 1 {
			t.Errorf("header %q: picked %s from %d profiles, want %s from 1", hdr, got, len(res.Profiles), want)
		}
	}
	single, err := scheduling.New(&profiles.SingleProfile{}, decode)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := single.Schedule(context.Background(), Req("m").Build(), eps); err != nil || res.Primary != "decode" {
		t.Errorf("single: %+v, %v", res, err)
	}
}

func TestHandleDoesNotAllocate(t *testing.T) {
	req := Req("m").Header("x-llm-d-profile", "decode").Build()
	configured := []string{"prefill", "decode"}
	run := func(context.Context, string) (scheduling.ProfileResult, error) {
		return scheduling.ProfileResult{}, nil
	}
	hp := &profiles.HeaderProfile{Header: "X-LLM-D-Profile"}
	if err := hp.Init(context.Background(), plugins.Deps{}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []scheduling.ProfileHandler{&profiles.SingleProfile{}, hp, &profiles.HeaderProfile{}} {
		ps := configured
		if _, ok := h.(*profiles.SingleProfile); ok {
			ps = configured[:1]
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = h.Handle(context.Background(), req, ps, run) }); n != 0 {
			t.Errorf("%T: %v allocations per Handle", h, n)
		}
	}
}
