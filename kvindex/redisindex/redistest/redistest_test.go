package redistest_test

import (
	"testing"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex/redistest"
)

func TestStartRestartStop(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do(time.Second, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, err := srv.Do(time.Second, "GET", "k"); err != nil || v != "v" {
		t.Fatalf("GET k: %q %v", v, err)
	}
	if _, err := srv.Do(time.Second, "NOSUCHCOMMAND"); err == nil {
		t.Fatal("an error reply was not an error")
	}
	srv.Restart()
	if v, err := srv.Do(time.Second, "EXISTS", "k"); err != nil || v != "0" {
		t.Fatalf("after a restart EXISTS k: %q %v (want an empty server)", v, err)
	}
	srv.Stop()
	if _, err := srv.Do(200*time.Millisecond, "PING"); err == nil {
		t.Fatal("a stopped server answers")
	}
	srv.Stop() // twice is fine
}
