// Package std bundles every in-tree plugin type in one registry, so a build
// that wants the stock set writes std.Registry() and registers its own types
// on top. Each type is registered with its category, stability and a
// one-line description for `eppkit plugins` and the generated catalogue.
package std
