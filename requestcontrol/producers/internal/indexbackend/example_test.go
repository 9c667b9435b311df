package indexbackend_test

import (
	"fmt"
	"log/slog"

	"github.com/eppkit/eppkit/requestcontrol/producers/internal/indexbackend"
)

// A producer's parameters as its configuration sets them: checked, then
// turned into the shared index's configuration.
func Example() {
	var r indexbackend.RedisParams
	r.SetDefaults()
	fmt.Println(indexbackend.Validate(indexbackend.Redis, &r))
	r.Address = "redis.picker.svc:6379"
	fmt.Println(indexbackend.Validate(indexbackend.Redis, &r))
	cfg, err := r.Config(slog.Default())
	fmt.Println(cfg.Address, cfg.KeyPrefix, cfg.Timeout, cfg.TTL, err)
	// Output:
	// [redis.address: required when indexBackend is redis]
	// []
	// redis.picker.svc:6379 eppkit: 50ms 1h0m0s <nil>
}
