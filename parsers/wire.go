package parsers

import (
	"bytes"
)

var modelKey = []byte(`"model"`)

// ReplaceModel returns doc with every JSON string value of a "model" member
// that equals from replaced by to, at any depth; it returns doc itself when
// there is none. doc may be a JSON document, a line or event of a
// server-sent event stream, or any bytes: it is scanned, not parsed, so it
// never fails, and text that merely contains the name (inside a string) is
// left alone. This is how the pipeline rewrites the engine's model name back
// to the client's in responses.
func ReplaceModel(doc []byte, from, to string) []byte {
	if from == to || len(doc) < len(from) {
		return doc
	}
	k := nextModel(doc, 0, from)
	if k < 0 {
		return doc
	}
	return appendReplace(make([]byte, 0, len(doc)+len(to)-len(from)+8), doc, from, to, k)
}

// AppendReplaceModel appends doc to dst with the model name replaced as
// ReplaceModel does, without allocating beyond dst's growth.
func AppendReplaceModel(dst, doc []byte, from, to string) []byte {
	if from == to {
		return append(dst, doc...)
	}
	k := nextModel(doc, 0, from)
	if k < 0 {
		return append(dst, doc...)
	}
	return appendReplace(dst, doc, from, to, k)
}

// appendReplace appends doc to dst, replacing the model values equal to
// from; the first such value's opening quote is at k.
func appendReplace(dst, doc []byte, from, to string, k int) []byte {
	copied := 0
	for k >= 0 {
		end, _ := stringEnd(doc, k)
		dst = append(dst, doc[copied:k]...)
		dst = AppendQuote(dst, to)
		copied = end + 1
		k = nextModel(doc, copied, from)
	}
	return append(dst, doc[copied:]...)
}

// nextModel returns the index of the opening quote of the next string value
// equal to from of a "model" member at or after i, or -1.
func nextModel(doc []byte, i int, from string) int {
	for {
		k := bytes.Index(doc[i:], modelKey)
		if k < 0 {
			return -1
		}
		k += i
		i = k + len(modelKey)
		if escaped(doc, k) {
			continue
		}
		j := skipSpace(doc, i)
		if j >= len(doc) || doc[j] != ':' {
			continue
		}
		j = skipSpace(doc, j+1)
		if j >= len(doc) || doc[j] != '"' {
			continue
		}
		end, ok := stringEnd(doc, j)
		if ok && stringEquals(doc[j:end+1], from) {
			return j
		}
	}
}

// escaped reports whether the byte at i is preceded by an odd number of
// backslashes.
func escaped(b []byte, i int) bool {
	n := 0
	for i--; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote closing the string that opens at
// b[start], or false when it does not close within b.
func stringEnd(b []byte, start int) (int, bool) {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i, true
		}
	}
	return 0, false
}

// stringEquals reports whether the quoted JSON string q decodes to s.
func stringEquals(q []byte, s string) bool {
	raw := q[1 : len(q)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == s
	}
	var d Decoder
	d.Reset(q)
	v := d.String()
	return d.End() == nil && v == s
}

// SSEData returns the data of a server-sent-event line ("data: {...}"),
// without the field name, the optional space and the line ending; ok is
// false for other lines (event:, id:, comments, blank lines).
func SSEData(line []byte) (data []byte, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return nil, false
	}
	rest = bytes.TrimPrefix(rest, []byte(" "))
	rest = bytes.TrimRight(rest, "\r\n")
	return rest, true
}

// ReadUsage reads a usage object into u, setting the fields it reports. It
// understands the shapes engines use: OpenAI chat and completions
// (prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens),
// OpenAI Responses (input_tokens, output_tokens,
// input_tokens_details.cached_tokens), Anthropic (input_tokens not counting
// cache_read_input_tokens and cache_creation_input_tokens, which are added to
// the prompt) and SGLang's meta_info (prompt_tokens, completion_tokens,
// cached_tokens). A null is read as absent; any other value that is not an
// object is a type error on d.
func ReadUsage(d *Decoder, u *Usage) {
	if d.Null() || !d.Object() {
		return
	}
	prompt, cacheRead, cacheWrite := -1, -1, -1
	for d.More() {
		switch string(d.Key()) {
		case "prompt_tokens", "input_tokens":
			if n := optInt(d); n >= 0 {
				prompt = n
			}
		case "completion_tokens", "output_tokens":
			if n := optInt(d); n >= 0 {
				u.CompletionTokens = n
			}
		case "cached_tokens":
			if n := optInt(d); n >= 0 {
				u.CachedTokens = n
			}
		case "cache_read_input_tokens":
			cacheRead = optInt(d)
		case "cache_creation_input_tokens":
			cacheWrite = optInt(d)
		case "prompt_tokens_details", "input_tokens_details":
			if d.Null() || !d.Object() {
				continue
			}
			for d.More() {
				if string(d.Key()) == "cached_tokens" {
					if n := optInt(d); n >= 0 {
						u.CachedTokens = n
					}
					continue
				}
				d.Skip()
			}
		default:
			d.Skip()
		}
	}
	if cacheRead >= 0 {
		u.CachedTokens = cacheRead
	}
	if prompt >= 0 {
		u.PromptTokens = prompt + max(cacheRead, 0) + max(cacheWrite, 0)
	}
}

// optInt reads a count, or -1 for null.
func optInt(d *Decoder) int {
	if n, ok := d.OptCount(); ok {
		return n
	}
	return -1
}
