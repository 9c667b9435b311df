package scorers

import (
	"sync"

	"github.com/eppkit/eppkit/plugins"
	"github.com/eppkit/eppkit/scheduling"
)

// InFlightSource reports the picker's own in-flight load per endpoint: the
// requests and prompt tokens it sent there that have not finished (tokens
// are released when the first token comes back). An in-flight load producer
// writes one under InFlightKey for every request; the active-request and
// token-load scorers read it. It must be safe for concurrent use.
type InFlightSource interface {
	InFlight(e *scheduling.Endpoint) (requests, tokens int64)
}

// DefaultInFlightProducer is the instance name (and type) of the in-flight
// load producer the graph auto-creates when a consumer needs one.
const DefaultInFlightProducer = "inflight-load-producer"

// InFlightKey is the data key under which the named producer writes its
// InFlightSource.
func InFlightKey(producer string) plugins.Key[InFlightSource] {
	return plugins.NewKey[InFlightSource]("inflight-load/" + producer)
}

// inFlightKey resolves the InFlightSource key of a configured producer name
// once.
type inFlightKey struct {
	once sync.Once
	key  plugins.Key[InFlightSource]
}

func (k *inFlightKey) get(producer string) plugins.Key[InFlightSource] {
	k.once.Do(func() {
		if producer == "" {
			producer = DefaultInFlightProducer
		}
		k.key = InFlightKey(producer)
	})
	return k.key
}
