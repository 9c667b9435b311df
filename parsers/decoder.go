package parsers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a Decoder accepts, as
// in encoding/json.
const MaxDepth = 10000

// Kind is the kind of a JSON value.
type Kind uint8

// Kinds of JSON values. Invalid means there is no value: the input ended, or
// the Decoder has an error.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"no value", "null", "a boolean", "a number", "a string", "an array", "an object"}

// String names the kind as an error message would ("a string", "an object").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Decoder reads JSON from a byte slice without reflection and without
// building a tree: the parser walks the document and keeps only the fields it
// needs. It is the tool the stock parsers use to parse a 7 KB chat body in a
// few microseconds; custom parsers may use it too.
//
// Reading is pull-style with a sticky error: after the first error every
// method returns a zero value and Err reports that error, so a parser checks
// once at the end. Errors name the JSON path of the offending value
// ("messages[2].content: want a string, got a number"), or the byte offset
// of a syntax error. The whole document is validated as it is read: strict
// JSON syntax, valid UTF-8, no control characters in strings, at most
// MaxDepth levels; values the parser does not need are validated by Skip.
//
//	var d parsers.Decoder
//	d.Reset(body)
//	for d.Object(); d.More(); {
//		switch string(d.Key()) {
//		case "model":
//			model = d.String()
//		default:
//			d.Skip()
//		}
//	}
//	if err := d.End(); err != nil { ... }
//
// Strings returned by String share one copy of the input, made on the first
// call: a parser that keeps many strings costs one allocation, and keeps the
// whole input alive while any of them lives. The zero Decoder holds the
// empty input. A Decoder is not safe for concurrent use.
type Decoder struct {
	data   []byte
	pos    int
	err    error
	str    string // string(data), made lazily
	hasStr bool
	depth  int      // open objects and arrays
	inline [8]frame // the first levels (no pointer into itself, so a Decoder can live on the stack)
	more   []frame  // the levels beyond
	buf    []byte   // scratch for unescaping
}

// frame is one open object or array.
type frame struct {
	obj bool
	n   int    // members seen so far
	key []byte // the current member's key (objects)
}

// Reset makes d read data from the start, forgetting any error.
func (d *Decoder) Reset(data []byte) {
	*d = Decoder{data: data, buf: d.buf[:0], more: d.more[:0]}
}

// frame returns the i-th open level.
func (d *Decoder) frame(i int) *frame {
	if i < len(d.inline) {
		return &d.inline[i]
	}
	return &d.more[i-len(d.inline)]
}

func (d *Decoder) push(f frame) {
	if d.depth < len(d.inline) {
		d.inline[d.depth] = f
	} else {
		d.more = append(d.more[:d.depth-len(d.inline)], f)
	}
	d.depth++
}

// Err returns the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns the position of the next unread byte.
func (d *Decoder) Offset() int { return d.pos }

// End checks that only whitespace follows the value just read and returns
// Err.
func (d *Decoder) End() error {
	if d.err == nil {
		if d.depth > 0 {
			d.syntax("unexpected end of input")
		} else if d.skipWS(); d.pos < len(d.data) {
			d.syntax("unexpected %s after the value", quoteByte(d.data[d.pos]))
		}
	}
	return d.err
}

// Errorf records an error at the current JSON path unless there is one
// already: "PATH: message".
func (d *Decoder) Errorf(format string, args ...any) {
	if d.err != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if p := d.Path(); p != "" {
		msg = p + ": " + msg
	}
	d.err = errors.New(msg)
}

// Path returns the JSON path of the value being read, e.g.
// "messages[2].content"; "" at the top level.
func (d *Decoder) Path() string {
	var b strings.Builder
	for i := range d.depth {
		f := d.frame(i)
		if f.obj {
			if f.key == nil {
				break
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(f.key)
		} else {
			if f.n == 0 {
				break
			}
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.n - 1))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func (d *Decoder) syntax(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("invalid JSON at byte %d: %s", d.pos, fmt.Sprintf(format, args...))
	}
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (d *Decoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// Kind reports the kind of the next value without reading it; Invalid at
// the end of input or after an error.
func (d *Decoder) Kind() Kind {
	if d.err != nil {
		return Invalid
	}
	d.skipWS()
	if d.pos >= len(d.data) {
		return Invalid
	}
	return kindOf(d.data[d.pos])
}

func kindOf(c byte) Kind {
	switch c {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return Number
	}
	return Invalid
}

// expect checks that the next value is of kind k; otherwise it records a
// type error (or a syntax error for a byte that starts no value).
func (d *Decoder) expect(k Kind) bool {
	got := d.Kind()
	if got == k {
		return true
	}
	if d.err == nil {
		if got == Invalid {
			if d.pos >= len(d.data) {
				d.syntax("unexpected end of input")
			} else {
				d.syntax("unexpected %s", quoteByte(d.data[d.pos]))
			}
		} else {
			d.Errorf("want %s, got %s", k, got)
		}
	}
	return false
}

// Object starts reading an object; read its members with More and Key. It
// reports false (and records a type error) when the next value is not an
// object.
func (d *Decoder) Object() bool { return d.open(Object) }

// Array starts reading an array; read its elements with More. It reports
// false (and records a type error) when the next value is not an array.
func (d *Decoder) Array() bool { return d.open(Array) }

func (d *Decoder) open(k Kind) bool {
	if !d.expect(k) {
		return false
	}
	if d.depth >= MaxDepth {
		d.syntax("nested deeper than %d levels", MaxDepth)
		return false
	}
	d.pos++
	d.push(frame{obj: k == Object})
	return true
}

// More reports whether the innermost open object or array has another
// member or element, consuming the separator before it; at the closing
// bracket it closes the object or array and reports false. In an object,
// call Key next, then read or Skip the value.
func (d *Decoder) More() bool {
	if d.err != nil || d.depth == 0 {
		return false
	}
	d.skipWS()
	if d.pos >= len(d.data) {
		d.syntax("unexpected end of input")
		return false
	}
	f := d.frame(d.depth - 1)
	closer := byte(']')
	if f.obj {
		closer = '}'
	}
	c := d.data[d.pos]
	if c == closer {
		d.pos++
		d.depth--
		return false
	}
	if f.n > 0 {
		if c != ',' {
			d.syntax("want ',' or %q, got %s", closer, quoteByte(c))
			return false
		}
		d.pos++
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == closer {
			d.syntax("trailing comma")
			return false
		}
	}
	f.n++
	f.key = nil
	return true
}

// Key reads an object member's key and the colon after it. The returned
// bytes are valid until the next call to Key.
func (d *Decoder) Key() []byte {
	if d.err != nil {
		return nil
	}
	if d.depth == 0 || !d.frame(d.depth-1).obj {
		d.Errorf("Key called outside an object")
		return nil
	}
	d.skipWS()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		if d.pos >= len(d.data) {
			d.syntax("unexpected end of input")
		} else {
			d.syntax("want a member name, got %s", quoteByte(d.data[d.pos]))
		}
		return nil
	}
	start, end, escaped := d.scanString()
	if d.err != nil {
		return nil
	}
	key := d.data[start:end]
	if escaped {
		key = d.unescape(nil, key)
	}
	d.skipWS()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		d.syntax("want ':' after a member name")
		return nil
	}
	d.pos++
	d.frame(d.depth - 1).key = key
	return key
}

// String reads a string.
func (d *Decoder) String() string {
	if !d.expect(String) {
		return ""
	}
	start, end, escaped := d.scanString()
	if d.err != nil {
		return ""
	}
	if escaped {
		d.buf = d.unescape(d.buf[:0], d.data[start:end])
		return string(d.buf)
	}
	if !d.hasStr {
		d.str, d.hasStr = string(d.data), true
	}
	return d.str[start:end]
}

// Int reads an integer: a JSON number without a fraction or exponent (a
// zero fraction, as in 7.0, is accepted) that fits in an int64.
func (d *Decoder) Int() int64 {
	if !d.expect(Number) {
		return 0
	}
	start := d.pos
	end, intEnd := d.scanNumber()
	if d.err != nil {
		return 0
	}
	num := d.data[start:end]
	if intEnd != end && !zeroFraction(d.data[intEnd:end]) {
		d.Errorf("want an integer, got %s", num)
		return 0
	}
	neg := num[0] == '-'
	digits := d.data[start:intEnd]
	if neg {
		digits = digits[1:]
	}
	var v uint64
	for _, c := range digits {
		if v > (1<<63)/10 {
			d.Errorf("integer %s out of range", num)
			return 0
		}
		v = v*10 + uint64(c-'0')
	}
	switch {
	case !neg && v > 1<<63-1, neg && v > 1<<63:
		d.Errorf("integer %s out of range", num)
		return 0
	case neg:
		return -int64(v)
	}
	return int64(v)
}

func zeroFraction(b []byte) bool {
	if len(b) == 0 || b[0] != '.' {
		return false
	}
	for _, c := range b[1:] {
		if c != '0' {
			return false
		}
	}
	return true
}

// Uint32 reads an integer in 0..4294967295, such as a token id.
func (d *Decoder) Uint32() uint32 {
	v := d.Int()
	if d.err == nil && (v < 0 || v > 1<<32-1) {
		d.Errorf("want an integer in 0..4294967295, got %d", v)
		return 0
	}
	return uint32(v)
}

// Bool reads true or false.
func (d *Decoder) Bool() bool {
	if !d.expect(Bool) {
		return false
	}
	if d.literal("true") {
		return true
	}
	d.literal("false")
	return false
}

// Null reads a null and reports true when the next value is null; it reads
// nothing and reports false otherwise.
func (d *Decoder) Null() bool {
	if d.Kind() != Null {
		return false
	}
	return d.literal("null")
}

func (d *Decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		d.syntax("invalid literal")
		return false
	}
	d.pos += len(lit)
	return true
}

// OptString reads a string, or a null as "" (absent).
func (d *Decoder) OptString() string {
	if d.Null() {
		return ""
	}
	return d.String()
}

// OptBool reads a boolean, or a null as false (absent).
func (d *Decoder) OptBool() bool {
	if d.Null() {
		return false
	}
	return d.Bool()
}

// OptCount reads a non-negative integer (capped at 1<<31); ok is false for
// a null. A negative number is an error.
func (d *Decoder) OptCount() (n int, ok bool) {
	if d.Null() {
		return 0, false
	}
	v := d.Int()
	if v < 0 {
		d.Errorf("want a count ≥ 0, got %d", v)
		return 0, false
	}
	return int(min(v, 1<<31)), d.err == nil
}

// Raw reads the next value, validating it, and returns its bytes as they
// appear in the input (a slice of it, not a copy).
func (d *Decoder) Raw() []byte {
	if d.err != nil {
		return nil
	}
	d.skipWS()
	start := d.pos
	d.Skip()
	if d.err != nil {
		return nil
	}
	return d.data[start:d.pos]
}

// Skip reads and validates the next value, whatever its kind.
func (d *Decoder) Skip() {
	if d.err != nil {
		return
	}
	// A bit stack of the open containers (1 = object), inline for 256 levels.
	var inline [4]uint64
	open := inline[:]
	depth := 0
	push := func(obj bool) bool {
		if depth+d.depth >= MaxDepth {
			d.syntax("nested deeper than %d levels", MaxDepth)
			return false
		}
		if depth/64 >= len(open) {
			open = append(open, 0)
		}
		if obj {
			open[depth/64] |= 1 << (depth % 64)
		} else {
			open[depth/64] &^= 1 << (depth % 64)
		}
		depth++
		return true
	}
	isObj := func() bool { return open[(depth-1)/64]&(1<<((depth-1)%64)) != 0 }
	for {
		// A value is expected.
		d.skipWS()
		if d.pos >= len(d.data) {
			d.syntax("unexpected end of input")
			return
		}
		switch c := d.data[d.pos]; c {
		case '{', '[':
			if !push(c == '{') {
				return
			}
			d.pos++
			d.skipWS()
			if d.pos < len(d.data) && (d.data[d.pos] == '}' && c == '{' || d.data[d.pos] == ']' && c == '[') {
				d.pos++
				depth--
				break
			}
			if c == '{' && !d.memberName() {
				return
			}
			continue
		case '"':
			d.scanString()
		case 't':
			d.literal("true")
		case 'f':
			d.literal("false")
		case 'n':
			d.literal("null")
		default:
			if kindOf(c) != Number {
				d.syntax("unexpected %s", quoteByte(c))
				return
			}
			d.scanNumber()
		}
		// A value ended: close containers until one has another member.
		for {
			if d.err != nil || depth == 0 {
				return
			}
			d.skipWS()
			if d.pos >= len(d.data) {
				d.syntax("unexpected end of input")
				return
			}
			obj := isObj()
			c := d.data[d.pos]
			if c == '}' && obj || c == ']' && !obj {
				d.pos++
				depth--
				continue
			}
			if c != ',' {
				closer := byte(']')
				if obj {
					closer = '}'
				}
				d.syntax("want ',' or %q, got %s", closer, quoteByte(c))
				return
			}
			d.pos++
			if obj && !d.memberName() {
				return
			}
			break
		}
	}
}

// memberName reads `"name" :` inside Skip.
func (d *Decoder) memberName() bool {
	d.skipWS()
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		if d.pos >= len(d.data) {
			d.syntax("unexpected end of input")
		} else {
			d.syntax("want a member name, got %s", quoteByte(d.data[d.pos]))
		}
		return false
	}
	d.scanString()
	d.skipWS()
	if d.err == nil && (d.pos >= len(d.data) || d.data[d.pos] != ':') {
		d.syntax("want ':' after a member name")
	}
	d.pos++
	return d.err == nil
}

// scanString reads the string at d.pos (which is '"') and returns the bounds
// of its contents and whether they contain escapes. It validates escapes,
// UTF-8 and the absence of control characters.
func (d *Decoder) scanString() (start, end int, escaped bool) {
	start = d.pos + 1
	i, q := start, -1 // q: the next '"' at or after i, once found
	for {
		if q < i {
			j := bytes.IndexByte(d.data[i:], '"')
			if j < 0 {
				d.pos = len(d.data)
				d.syntax("unterminated string")
				return start, start, false
			}
			q = i + j
		}
		seg := d.data[i:q]
		k := bytes.IndexByte(seg, '\\')
		if k >= 0 {
			seg = seg[:k]
		}
		if bad := invalidText(seg); bad >= 0 {
			d.pos = i + bad
			if d.data[d.pos] < 0x20 {
				d.syntax("control character %s in a string", quoteByte(d.data[d.pos]))
			} else {
				d.syntax("invalid UTF-8")
			}
			return start, start, false
		}
		if k < 0 {
			d.pos = q + 1
			return start, q, escaped
		}
		escaped = true
		p := i + k // a backslash
		if p+1 >= len(d.data) {
			d.pos = p
			d.syntax("unterminated string")
			return start, start, false
		}
		switch d.data[p+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = p + 2
		case 'u':
			if p+6 > len(d.data) || !isHex4(d.data[p+2:p+6]) {
				d.pos = p
				d.syntax("invalid \\u escape")
				return start, start, false
			}
			i = p + 6
		default:
			d.pos = p
			d.syntax("invalid escape %s", quoteByte(d.data[p+1]))
			return start, start, false
		}
	}
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// invalidText returns the index of the first byte of b that may not appear
// raw in a JSON string (a control character or invalid UTF-8), or -1. Eight
// bytes of printable ASCII are checked at a time.
func invalidText(b []byte) int {
	i := 0
	for i < len(b) {
		for i+32 <= len(b) { // four words at a time while none has a flag
			w0 := binary.LittleEndian.Uint64(b[i:])
			w1 := binary.LittleEndian.Uint64(b[i+8:])
			w2 := binary.LittleEndian.Uint64(b[i+16:])
			w3 := binary.LittleEndian.Uint64(b[i+24:])
			if ((w0-0x20*lsb)|w0|(w1-0x20*lsb)|w1|(w2-0x20*lsb)|w2|(w3-0x20*lsb)|w3)&msb != 0 {
				break
			}
			i += 32
		}
		if i == len(b) {
			break
		}
		if i+8 <= len(b) {
			// No byte below 0x20 and none at or above 0x80 (false positives,
			// from borrows, only send a word to the byte loop).
			if w := binary.LittleEndian.Uint64(b[i:]); ((w-0x20*lsb)|w)&msb == 0 {
				i += 8
				continue
			}
		}
		switch c := b[i]; {
		case c < 0x20:
			return i
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return i
			}
			i += n
		}
	}
	return -1
}

// unescape appends the decoded contents of the string s (escapes already
// validated) to dst. Lone surrogates become U+FFFD, as in encoding/json.
func (d *Decoder) unescape(dst, s []byte) []byte {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:k]...)
		s = s[k:]
		switch c := s[1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(s[2:6]))
			s = s[6:]
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
					if dec := utf16.DecodeRune(r, rune(hex4(s[2:6]))); dec != utf8.RuneError {
						r2, s = dec, s[6:]
					}
				}
				r = r2
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		s = s[2:]
	}
	return dst
}

func hex4(b []byte) uint16 {
	var v uint16
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		v = v<<4 | uint16(c)
	}
	return v
}

// scanNumber reads the number at d.pos and returns its end and the end of
// its integer part.
func (d *Decoder) scanNumber() (end, intEnd int) {
	b, i := d.data, d.pos
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		d.pos = i
		d.syntax("invalid number")
		return i, i
	}
	intEnd = i
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.pos = i
			d.syntax("invalid number")
			return i, intEnd
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			d.pos = i
			d.syntax("invalid number")
			return i, intEnd
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	d.pos = i
	return i, intEnd
}

// AppendQuote appends s as a JSON string to dst, escaping quotes,
// backslashes and control characters (and nothing else: UTF-8 is kept).
func AppendQuote(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
