package redisindex

import "context"

// sweepCount is how many fields of a holders hash one sweep step scans.
const sweepCount = 1000

// sweep clears the bits of an index's dropped endpoint ids — of endpoints
// removed or cleared, or whose data expired — from its holders hash, one
// step of a scan per round trip, then frees the ids for new endpoints. per
// is the bits an endpoint has in a bitmap. Until it runs a dropped id only
// costs memory: no endpoint's id key names it, so no lookup reads its bits.
// Every replica sweeps; each step and the freeing touch only the ids still
// dropped, so sweeps that overlap cannot clear or free an id another
// replica's sweep freed and a new endpoint took meanwhile.
func sweep(c *conn, holdKey, ownersKey, idPrefix string, per int) {
	if !c.up() {
		return
	}
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.WriteTimeout)
		defer cancel()
		return c.done(context.Background(), "sweep", f(ctx))
	}
	keys := []string{holdKey, ownersKey}
	var ids []string
	err := call(func(ctx context.Context) (err error) {
		ids, err = orphansScript.Run(ctx, c.client, keys, idPrefix).StringSlice()
		return err
	})
	if err != nil || len(ids) == 0 {
		return
	}
	args := make([]any, 4, 4+len(ids))
	args[1], args[2], args[3] = sweepCount, per, idPrefix
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
