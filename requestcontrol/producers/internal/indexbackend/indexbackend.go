package indexbackend

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/eppkit/eppkit/kvindex/redisindex"
	"github.com/eppkit/eppkit/plugins"
)

// The backends of indexBackend.
const (
	// Memory keeps the index in the picker's memory: each replica its own.
	Memory = "memory"
	// Redis keeps it in a Redis (or Valkey) server that every replica of
	// the picker shares.
	Redis = "redis"
)

// RedisParams are the redis parameters of a prefix producer (and of the
// inflight-load-producer, which ignores TTL, WriteQueue and Mirror).
type RedisParams struct {
	Address     string           `json:"address" doc:"host:port of the Redis or Valkey server every replica shares"`
	DB          int              `json:"db" doc:"database number"`
	KeyPrefix   string           `json:"keyPrefix" doc:"prefix of every key the index writes; the replicas of one picker share it, another pool on the same server needs its own"`
	UsernameEnv string           `json:"usernameEnv" doc:"environment variable holding the ACL username (empty: none)"`
	PasswordEnv string           `json:"passwordEnv" doc:"environment variable holding the password (empty: none)"`
	TLS         TLSParams        `json:"tls" doc:"TLS to the server"`
	PoolSize    int              `json:"poolSize" doc:"connections per replica (0: 10 per CPU)"`
	Timeout     plugins.Duration `json:"timeout" doc:"bound on every lookup: past it, or while the server is down, requests go on without prefix data"`
	TTL         plugins.Duration `json:"ttl" doc:"an endpoint's data expires after this long unless a replica that has it in its pool refreshes it (0: never)"`
	WriteQueue  int              `json:"writeQueue" doc:"index updates a replica queues for writing; past it they are dropped and counted"`
	Mirror      bool             `json:"mirror" doc:"keep a copy of the shared index in this replica, fed by the server's change log: lookups read it without a round trip while it is current (within a second), the server otherwise"`
}

// TLSParams configure TLS to the server.
type TLSParams struct {
	Enabled            bool   `json:"enabled" doc:"connect with TLS"`
	ServerName         string `json:"serverName" doc:"name to verify the server's certificate against (default: the address's host)"`
	CAFile             string `json:"caFile" doc:"PEM file of the CAs to trust (default: the system's)"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify" doc:"do not verify the server's certificate (tests only)"`
}

// SetDefaults sets the defaults of redisindex.
func (r *RedisParams) SetDefaults() {
	r.KeyPrefix = redisindex.DefaultKeyPrefix
	r.Timeout = plugins.Duration(redisindex.DefaultTimeout)
	r.TTL = plugins.Duration(redisindex.DefaultTTL)
	r.WriteQueue = redisindex.DefaultQueueSize
}

// Validate checks backend (the indexBackend parameter) and, for Redis, the
// redis parameters; the errors name the parameters.
func Validate(backend string, r *RedisParams) []error {
	switch backend {
	case Memory:
		return nil
	case Redis:
	default:
		return []error{fmt.Errorf("indexBackend: %q is not %s or %s", backend, Memory, Redis)}
	}
	var errs []error
	if r.Address == "" {
		errs = append(errs, errors.New("redis.address: required when indexBackend is redis"))
	} else if _, _, err := net.SplitHostPort(r.Address); err != nil {
		errs = append(errs, fmt.Errorf("redis.address: %q is not host:port", r.Address))
	}
	if r.DB < 0 {
		errs = append(errs, errors.New("redis.db: must be ≥ 0"))
	}
	if r.KeyPrefix == "" {
		errs = append(errs, errors.New("redis.keyPrefix: must not be empty"))
	}
	if r.PoolSize < 0 {
		errs = append(errs, errors.New("redis.poolSize: must be ≥ 0"))
	}
	if r.Timeout <= 0 {
		errs = append(errs, errors.New("redis.timeout: must be > 0"))
	}
	if r.TTL < 0 {
		errs = append(errs, errors.New("redis.ttl: must be ≥ 0"))
	}
	if r.WriteQueue <= 0 {
		errs = append(errs, errors.New("redis.writeQueue: must be > 0"))
	}
	if !r.TLS.Enabled && (r.TLS.CAFile != "" || r.TLS.ServerName != "" || r.TLS.InsecureSkipVerify) {
		errs = append(errs, errors.New("redis.tls: set enabled: true to use caFile, serverName or insecureSkipVerify"))
	}
	return errs
}

// Config returns the redisindex configuration of r: the credentials read
// from the environment, the CA file read. log receives the index's errors.
func (r *RedisParams) Config(log *slog.Logger) (redisindex.Config, error) {
	cfg := redisindex.Config{
		Address:   r.Address,
		DB:        r.DB,
		PoolSize:  r.PoolSize,
		Timeout:   time.Duration(r.Timeout),
		KeyPrefix: r.KeyPrefix,
		TTL:       time.Duration(r.TTL),
		QueueSize: r.WriteQueue,
		Mirror:    r.Mirror,
		Logger:    log,
	}
	if cfg.TTL == 0 {
		cfg.TTL = -1 // the parameter's 0 is "never"
	}
	var err error
	if cfg.Username, err = fromEnv("redis.usernameEnv", r.UsernameEnv); err != nil {
		return cfg, err
	}
	if cfg.Password, err = fromEnv("redis.passwordEnv", r.PasswordEnv); err != nil {
		return cfg, err
	}
	if r.TLS.Enabled {
		t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.TLS.ServerName, InsecureSkipVerify: r.TLS.InsecureSkipVerify}
		if t.ServerName == "" {
			t.ServerName, _, _ = net.SplitHostPort(r.Address)
		}
		if r.TLS.CAFile != "" {
			pem, err := os.ReadFile(r.TLS.CAFile)
			if err != nil {
				return cfg, fmt.Errorf("redis.tls.caFile: %w", err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("redis.tls.caFile: no PEM certificate in %s", r.TLS.CAFile)
			}
		}
		cfg.TLS = t
	}
	return cfg, nil
}

// fromEnv reads the environment variable named by the parameter param
// (none when name is empty).
func fromEnv(param, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fmt.Errorf("%s: environment variable %s is not set", param, name)
	}
	return v, nil
}
