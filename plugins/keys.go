package plugins

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// AnyKey is the untyped view of a Key, used by the dependency graph.
type AnyKey interface {
	KeyName() string
	KeyType() reflect.Type
}

// Key names a typed value that producers write and consumers read, on a
// request (per-request state) or on an endpoint (attributes). Two keys with the
// same name must have the same type; the graph rejects a mismatch.
type Key[T any] struct{ name string }

// NewKey returns the key called name for values of type T.
func NewKey[T any](name string) Key[T] { return Key[T]{name: name} }

// KeyName returns the key's name.
func (k Key[T]) KeyName() string { return k.name }

// KeyType returns T.
func (k Key[T]) KeyType() reflect.Type { return reflect.TypeFor[T]() }

// String returns "name (type)", e.g. "prefix-match/p (*scheduling.PrefixMatch)".
func (k Key[T]) String() string { return fmt.Sprintf("%s (%v)", k.name, k.KeyType()) }

// Values is a small typed key-value store: per-request state or endpoint
// attributes. Lookups are a linear scan, which beats a map for the handful of
// keys a request carries. The zero value is empty and ready. A Values is not
// safe for concurrent writes.
type Values struct{ kv []kv }

type kv struct {
	name string
	val  any
}

// Get returns the value stored under k.
func Get[T any](v *Values, k Key[T]) (T, bool) {
	for i := range v.kv {
		if v.kv[i].name == k.name {
			t, ok := v.kv[i].val.(T)
			return t, ok
		}
	}
	var zero T
	return zero, false
}

// Set stores val under k, replacing an earlier value.
func Set[T any](v *Values, k Key[T], val T) {
	for i := range v.kv {
		if v.kv[i].name == k.name {
			v.kv[i].val = val
			return
		}
	}
	v.kv = append(v.kv, kv{k.name, val})
}

// Delete removes the value stored under the key named name.
func (v *Values) Delete(name string) {
	for i := range v.kv {
		if v.kv[i].name == name {
			v.kv = append(v.kv[:i], v.kv[i+1:]...)
			return
		}
	}
}

// Reset empties v, keeping its storage.
func (v *Values) Reset() {
	clear(v.kv)
	v.kv = v.kv[:0]
}

// Clone returns a copy of v.
func (v *Values) Clone() Values { return Values{kv: append([]kv(nil), v.kv...)} }

// Duration is a time.Duration that decodes from a Go duration string ("1.5s")
// or a number of nanoseconds, for plugin parameters.
type Duration time.Duration

// UnmarshalJSON accepts "10ms" style strings or integer nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q", s)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("invalid duration %s: want a string like \"50ms\"", b)
	}
	*d = Duration(n)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
