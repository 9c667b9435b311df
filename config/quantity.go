package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Quantity is a Kubernetes-style resource quantity, the format llm-d uses for
// flow-control limits: a decimal number with an optional binary suffix (Ki, Mi,
// Gi, Ti, Pi, Ei), decimal suffix (m, k, M, G, T, P, E) or exponent (1e6).
// Fractions round up to a whole unit ("500m" is 1). The zero value is 0.
type Quantity struct {
	s string
	v int64
}

// ParseQuantity parses s, e.g. "1Gi", "500M", "100", "1k".
func ParseQuantity(s string) (Quantity, error) {
	s = strings.TrimSpace(s)
	num, suffix := splitQuantity(s)
	if num == "" {
		return Quantity{}, fmt.Errorf("invalid quantity %q: want a number with an optional suffix like 1Gi, 500M or 1k", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return Quantity{}, fmt.Errorf("invalid quantity %q", s)
	}
	mult, err := quantityMultiplier(suffix)
	if err != nil {
		return Quantity{}, fmt.Errorf("invalid quantity %q: %w", s, err)
	}
	r.Mul(r, mult)
	if r.Sign() < 0 {
		return Quantity{}, fmt.Errorf("invalid quantity %q: must not be negative", s)
	}
	// Round up to an integer, like resource.Quantity.Value.
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return Quantity{}, fmt.Errorf("invalid quantity %q: larger than %d", s, int64(math.MaxInt64))
	}
	return Quantity{s: s, v: q.Int64()}, nil
}

// NewQuantity returns the quantity v.
func NewQuantity(v int64) Quantity { return Quantity{v: v} }

// Value returns the quantity as an integer.
func (q Quantity) Value() int64 { return q.v }

// String returns the quantity as written, or its value.
func (q Quantity) String() string {
	if q.s != "" {
		return q.s
	}
	return fmt.Sprint(q.v)
}

// splitQuantity splits s into its number and suffix.
func splitQuantity(s string) (num, suffix string) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		if s[i] != '.' {
			digits++
		}
		i++
	}
	if digits == 0 {
		return "", ""
	}
	return s[:i], s[i:]
}

var binarySuffixes = map[string]uint{"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}

var decimalSuffixes = map[string]int{"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

func quantityMultiplier(suffix string) (*big.Rat, error) {
	if shift, ok := binarySuffixes[suffix]; ok {
		return new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), shift)), nil
	}
	exp, ok := decimalSuffixes[suffix]
	if !ok && len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') {
		var err error
		if _, err = fmt.Sscanf(suffix[1:], "%d", &exp); err == nil && validExponent(suffix[1:]) {
			ok = true
		}
	}
	if !ok {
		return nil, errors.New("unknown suffix " + fmt.Sprintf("%q", suffix))
	}
	if exp > 30 || exp < -30 {
		return nil, errors.New("exponent out of range")
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
	if exp < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p), nil
	}
	return new(big.Rat).SetInt(p), nil
}

func validExponent(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
