// Package archtest enforces the layering rules of DESIGN.md: which eppkit
// packages may import which, which third-party modules the root module may
// require, and which packages may import them. In particular kvindex core
// imports xxhash, msgpack and zmq4 only; github.com/redis/go-redis/v9 is
// imported by kvindex/redisindex and by no other package.
package archtest
