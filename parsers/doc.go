// Package parsers turns raw request bodies into a typed Body the pipeline and
// the plugins read (model, prompt or messages, tools, token ids, stream flags),
// and chooses the parser for a request by the longest matching URL-path suffix.
//
// Each API family has its own subpackage (openai, ...). A Parser claims path
// suffixes ("chat/completions"); Selector picks the parser whose suffix is the
// longest match on a path-segment boundary, after the query string and
// trailing slashes are stripped.
package parsers
