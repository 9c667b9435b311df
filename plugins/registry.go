package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Validator is implemented by plugins that check their parameters after decoding.
type Validator interface{ Validate() error }

// Defaulter is implemented by plugins that set parameter defaults. SetDefaults is
// called on the fresh value before the parameters are decoded into it, so fields
// present in the configuration override the defaults.
type Defaulter interface{ SetDefaults() }

// Info describes a registered plugin type. It is metadata for documentation and
// tooling; the runtime only needs Type.
type Info struct {
	Type        string
	Category    string // e.g. "scorer", "filter", "picker", "profile-handler", "producer", "parser"
	Stability   string // "stable", "beta" or "alpha"
	Description string
	// Formula is the plugin's rule in one line of plain math, e.g. a
	// scorer's "(maxW − W)/(maxW − minW)"; empty when a sentence says it all.
	Formula string
	// DefaultFor lists the data keys this type produces when nobody configured a
	// producer for them; the graph auto-creates an instance named after the type.
	DefaultFor []string
	goType     reflect.Type // the struct type (not the pointer)
}

// GoType returns the Go type the plugin type was registered with: a pointer
// to the plugin's struct, e.g. *scorers.Queue.
func (i *Info) GoType() reflect.Type { return reflect.PointerTo(i.goType) }

// Params describes the plugin's parameters, derived from its struct fields:
// the json name, the Go type, the default (after SetDefaults) and the `doc`
// tag. A parameter that is itself a struct (a YAML mapping) lists its own
// fields in Fields, the same way.
func (i *Info) Params() []Param {
	v := reflect.New(i.goType)
	if d, ok := v.Interface().(Defaulter); ok {
		d.SetDefaults()
	}
	return params(v.Elem())
}

// params describes the json-visible fields of the struct value v.
func params(v reflect.Value) []Param {
	var out []Param
	t := v.Type()
	for n := 0; n < t.NumField(); n++ {
		f := t.Field(n)
		name, ok := jsonName(f)
		if !ok {
			continue
		}
		def := v.FieldByIndex(f.Index)
		p := Param{Name: name, Type: f.Type.String(), Doc: f.Tag.Get("doc")}
		if !def.IsZero() {
			b, _ := json.Marshal(def.Interface())
			p.Default = string(b)
		}
		if isMapping(f.Type) {
			p.Fields = params(def)
		}
		out = append(out, p)
	}
	return out
}

// isMapping reports whether a parameter of type t is a struct decoded field
// by field (not a value with its own JSON form, like Duration).
func isMapping(t reflect.Type) bool {
	return t.Kind() == reflect.Struct &&
		!t.Implements(reflect.TypeFor[json.Unmarshaler]()) &&
		!reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
}

// Param documents one plugin parameter.
type Param struct {
	Name, Type, Default, Doc string
	// Fields are the parameter's own fields when it is a mapping (a struct),
	// with their defaults taken from the parameter's default.
	Fields []Param
}

func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

// Option sets optional metadata at registration.
type Option func(*Info)

// Category sets the plugin's category for documentation.
func Category(c string) Option { return func(i *Info) { i.Category = c } }

// Stability sets the plugin's stability level for documentation.
func Stability(s string) Option { return func(i *Info) { i.Stability = s } }

// Description sets the plugin's one-line description.
func Description(d string) Option { return func(i *Info) { i.Description = d } }

// Formula sets the plugin's rule in one line of math (Info.Formula).
func Formula(f string) Option { return func(i *Info) { i.Formula = f } }

// DefaultFor marks the type as the default producer of the given data keys.
func DefaultFor(keys ...AnyKey) Option {
	return func(i *Info) {
		for _, k := range keys {
			i.DefaultFor = append(i.DefaultFor, k.KeyName())
		}
	}
}

// Registry maps plugin types to their Go types. The zero value is not usable;
// call NewRegistry. A Registry is safe for concurrent reads once populated.
type Registry struct {
	types map[string]*Info
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{types: map[string]*Info{}} }

// Register adds plugin type typ whose instances are values of T, which must be
// a pointer to a struct. Registering a type twice panics: it is a programming
// error found by the first test that builds the registry.
func Register[T any](r *Registry, typ string, opts ...Option) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Pointer || rt.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("plugins: Register %q: %v is not a pointer to a struct", typ, rt))
	}
	if _, dup := r.types[typ]; dup {
		panic(fmt.Sprintf("plugins: type %q registered twice", typ))
	}
	info := &Info{Type: typ, goType: rt.Elem()}
	for _, o := range opts {
		o(info)
	}
	r.types[typ] = info
}

// Lookup returns the registration of typ.
func (r *Registry) Lookup(typ string) (*Info, bool) {
	i, ok := r.types[typ]
	return i, ok
}

// Types returns every registered type's Info sorted by type name.
func (r *Registry) Types() []*Info {
	out := make([]*Info, 0, len(r.types))
	for _, i := range r.types {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Type < out[b].Type })
	return out
}

// DefaultProducer returns the type registered as default producer of key.
func (r *Registry) DefaultProducer(key string) (*Info, bool) {
	for _, i := range r.Types() {
		for _, k := range i.DefaultFor {
			if k == key {
				return i, true
			}
		}
	}
	return nil, false
}

// ErrUnknownType is returned by Build for a type that is not registered.
var ErrUnknownType = errors.New("unknown plugin type")

// Build creates an instance of typ named name from JSON parameters (nil or
// empty means none): new value, SetDefaults, strict decode, Validate.
func (r *Registry) Build(typ, name string, params []byte) (any, error) {
	info, ok := r.types[typ]
	if !ok {
		return nil, fmt.Errorf("plugin %q: %w %q", name, ErrUnknownType, typ)
	}
	v := reflect.New(info.goType).Interface()
	if d, ok := v.(Defaulter); ok {
		d.SetDefaults()
	}
	if p := bytes.TrimSpace(params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): parameters: %s", name, typ, describeJSONError(err))
		}
	}
	if val, ok := v.(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
		}
	}
	return v, nil
}

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(value)"
		}
		return fmt.Sprintf("field %q: cannot use %s as %v", field, te.Value, te.Type)
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + rest
	}
	return strings.TrimPrefix(msg, "json: ")
}
