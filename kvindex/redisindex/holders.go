package redisindex

import "context"

// holderKeys name an index's holders hash and what goes with it.
type holderKeys struct {
	hold     string // block → bitmap of the ids of its holders
	owners   string // id → endpoint, for every id in use or not yet swept
	log      string // the change log (logLib)
	epoch    string // the log's epoch
	idPrefix string // the prefix of the endpoints' id keys
	per      int    // bits an endpoint has in a bitmap
}

func newHolderKeys(prefix, index string, per int) holderKeys {
	return holderKeys{
		hold:     prefix + index + "h",
		owners:   prefix + index + "o",
		log:      prefix + index + "l",
		epoch:    prefix + index + "e",
		idPrefix: prefix + index + "i:",
		per:      per,
	}
}

// ttlKeys are the keys whose TTL a refresh extends last, so that they
// outlive every endpoint's keys.
func (h holderKeys) ttlKeys() []string { return []string{h.hold, h.owners, h.log, h.epoch} }

// sweepCount is how many fields of a holders hash one sweep step scans.
const sweepCount = 1000

// sweep clears the bits of an index's dropped endpoint ids — of endpoints
// removed or cleared, or whose data expired — from its holders hash, one
// step of a scan per round trip, then frees the ids for new endpoints. Until it runs a dropped id only
// costs memory: no endpoint's id key names it, so no lookup reads its bits.
// Every replica sweeps; each step and the freeing touch only the ids still
// dropped, so sweeps that overlap cannot clear or free an id another
// replica's sweep freed and a new endpoint took meanwhile.
func sweep(c *conn, h holderKeys) {
	if !c.up() {
		return
	}
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.WriteTimeout)
		defer cancel()
		return c.done(context.Background(), "sweep", f(ctx))
	}
	keys := []string{h.hold, h.owners, h.log, h.epoch}
	var ids []string
	err := call(func(ctx context.Context) (err error) {
		ids, err = orphansScript.Run(ctx, c.client, keys, h.idPrefix).StringSlice()
		return err
	})
	if err != nil || len(ids) == 0 {
		return
	}
	args := make([]any, 4, 4+len(ids))
	args[1], args[2], args[3] = sweepCount, h.per, h.idPrefix
	for _, id := range ids {
		args = append(args, id)
	}
	for cursor := "0"; ; {
		args[0] = cursor
		err := call(func(ctx context.Context) (err error) {
			cursor, err = sweepScript.Run(ctx, c.client, keys, args...).Text()
			return err
		})
		if err != nil {
			return
		}
		select {
		case <-c.stop:
			return
		default:
		}
		if cursor == "0" {
			break
		}
	}
	_ = call(func(ctx context.Context) error {
		return freeScript.Run(ctx, c.client, keys, args[3:]...).Err()
	})
}
