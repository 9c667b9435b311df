package kvindex

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"
)

func seq(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

// TestVLLMHasherGolden pins VLLMHasher to vLLM's sha256_cbor. The vectors
// come from testdata/vllm_sha256_cbor.py, which follows vLLM's code
// (init_none_hash, hash_block_tokens, the LoRA and cache-salt extra keys,
// maybe_convert_block_hash) with the cbor2 library vLLM uses (Debian's
// python3-cbor2 5.4.6) and hashlib — not with vLLM itself.
func TestVLLMHasherGolden(t *testing.T) {
	if got := NewVLLMHasher("0").NoneHash(); hex.EncodeToString(got[:]) != "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e" {
		t.Fatalf("NONE_HASH(\"0\") = %x", got)
	}
	mixed := slices.Repeat([]uint32{128000, 9906, 11, 1917, 0, 70000, 65535, 65536, 23, 24, 255, 256, 4294967295, 1, 2, 3}, 3)
	for _, c := range []struct {
		seed       string
		tokens     []uint32
		bs         int
		lora, salt string
		want       []uint64
	}{
		{"0", seq(1, 32), 16, "", "", []uint64{3236607068019569386, 2758186210834249151}},
		// Every CBOR integer width: 1, 2, 3, 5 bytes.
		{"0", mixed, 16, "", "", []uint64{7643804354834223477, 904804758218652821, 687588354917321169}},
		{"42", seq(100, 64), 16, "sql-lora", "", []uint64{15685600903889434850, 14748601296418208214, 2425672934233868881, 11564085754509182576}},
		{"42", seq(100, 64), 16, "", "tenant-a", []uint64{18254131068505440283, 5262844125104981284, 4434751096472582531, 11371518632678755778}},
		{"42", seq(100, 64), 16, "sql-lora", "tenant-a", []uint64{10620035515624638311, 10648304681396569783, 8283737900541250589, 3971526750543122985}},
		{"vllm-none-hash", seq(7, 48), 16, "", "", []uint64{10727446260810963917, 16690057507566703747, 13262548445017168590}},
		// Only full blocks are hashed.
		{"0", seq(1, 10), 4, "", "", []uint64{2164874634404590027, 17270480062156288726}},
	} {
		got := NewVLLMHasher(c.seed).AppendHashes(nil, c.tokens, c.bs, c.lora, c.salt, 0)
		if !slices.Equal(got, c.want) {
			t.Errorf("seed %q lora %q salt %q: %d, want %d", c.seed, c.lora, c.salt, got, c.want)
		}
	}
	if got := NewVLLMHasher("0").AppendHashes(nil, seq(1, 64), 16, "", "", 2); len(got) != 2 {
		t.Errorf("maxBlocks 2: %d hashes", len(got))
	}
}

func TestCBORHead(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "00"}, {23, "17"}, {24, "1818"}, {255, "18ff"}, {256, "190100"}, {65535, "19ffff"},
		{65536, "1a00010000"}, {1<<32 - 1, "1affffffff"}, {1 << 32, "1b0000000100000000"},
	} {
		if got := hex.EncodeToString(cborHead(nil, 0, c.n)); got != c.want {
			t.Errorf("cborHead(0, %d) = %s, want %s", c.n, got, c.want)
		}
	}
	if got := hex.EncodeToString(cborText(nil, "0")); got != "6130" {
		t.Errorf("text \"0\" = %s", got)
	}
	if sha256.Size != 32 {
		t.Fatal("sha256")
	}
}
