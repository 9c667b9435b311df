// Package parserstest is the test kit for request parsers: a corpus of
// malformed bodies that every JSON parser must reject with an error wrapping
// parsers.ErrBadRequest and a message (the pipeline's 400), never a panic,
// and seeds for fuzzing. A parser's test needs one line per API it claims:
//
//	parserstest.TestMalformed(t, &myparser.Parser{}, "generate", `{"model":"m","text":"x"}`)
package parserstest
