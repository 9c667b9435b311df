package profiles_test

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/scheduling"
	"github.com/eppkit/eppkit/scheduling/profiles"
	"github.com/eppkit/eppkit/scheduling/schedulingtest"
)

// A header-profile-handler lets a request choose its scheduling profile.
func ExampleHeaderProfile() {
	eps := schedulingtest.Eps(schedulingtest.Ep("gpu-a100"), schedulingtest.Ep("gpu-h100"))
	cheap := schedulingtest.Profile("cheap").Scorer(schedulingtest.ScoreByName{"gpu-a100": 1}, 1).Build()
	fast := schedulingtest.Profile("fast").Scorer(schedulingtest.ScoreByName{"gpu-h100": 1}, 1).Build()
	s, _ := scheduling.New(&profiles.HeaderProfile{Header: "x-llm-d-profile", DefaultProfile: "cheap"}, cheap, fast)

	for _, profile := range []string{"fast", ""} {
		req := schedulingtest.Req("llama-3").Header("x-llm-d-profile", profile).Build()
		res, _ := s.Schedule(context.Background(), req, eps)
		fmt.Println(res.Primary, res.PrimaryResult().Endpoints[0].Name)
	}
	// Output:
	// fast gpu-h100
	// cheap gpu-a100
}
