// Package redistest runs a real redis-server for tests: on a free loopback
// port, without persistence, in a temporary directory, stopped when the test
// ends. Tests of the Redis-backed indexes use it. A Proxy in front of the
// server cuts one client off (as if it were killed or partitioned) while
// the others go on.
//
// When redis-server is not on PATH, Start skips the test — or fails it, with
// a message saying what to install, when the environment variable
// EPPKIT_REQUIRE_REDIS is set to 1 (CI sets it, so a missing server never
// passes silently there).
package redistest
