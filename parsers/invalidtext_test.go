package parsers

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// invalidTextRef is the byte-at-a-time definition invalidText must match.
func invalidTextRef(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if b[i] < 0x20 || r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// TestInvalidTextEveryPosition puts each kind of bad byte at every offset of
// buffers of every length up to 100, so each of the 32-, 8- and 1-byte paths
// and their boundaries is crossed.
func TestInvalidTextEveryPosition(t *testing.T) {
	bad := [][]byte{{0x00}, {0x1f}, {'\n'}, {0x80}, {0xff}, {0xc3}, {0xe2, 0x82}}
	good := []byte("é€😀")
	for n := 0; n <= 100; n++ {
		base := bytes.Repeat([]byte("a"), n)
		if got := invalidText(base); got != -1 {
			t.Fatalf("len %d clean: got %d", n, got)
		}
		for at := 0; at < n; at++ {
			for _, bb := range append(bad, good) {
				b := append(append(append([]byte{}, base[:at]...), bb...), base[at:]...)
				if got, want := invalidText(b), invalidTextRef(b); got != want {
					t.Fatalf("len %d, %x at %d: got %d, want %d", n, bb, at, got, want)
				}
			}
		}
	}
}

func BenchmarkInvalidText(b *testing.B) {
	s := bytes.Repeat([]byte("abcdefghijklmnop"), 1800) // 28.8 KB of prompt text
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if invalidText(s) >= 0 {
			b.Fatal("clean text reported invalid")
		}
	}
}
