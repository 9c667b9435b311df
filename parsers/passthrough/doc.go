// Package passthrough is the fallback parser: it claims no path, so it parses
// whatever no other configured parser claims, and it never rejects a body.
// When the body is a JSON object it reads the top-level model and stream
// members (best effort); otherwise the Body has only Raw. Prefix routing sees
// no prompt, so such requests are spread by load alone.
package passthrough
