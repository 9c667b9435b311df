#!/usr/bin/env python3
"""Golden vectors for kvindex.VLLMHasher (TestVLLMHasherGolden).

Reproduces vLLM's sha256_cbor block hashing (vllm/utils/hashing.py and
vllm/v1/core/kv_cache_utils.py: init_none_hash, hash_block_tokens,
generate_block_hash_extra_keys, maybe_convert_block_hash) with the cbor2
library vLLM uses (cbor2.dumps(obj, canonical=True)) and hashlib, without
importing vLLM. Run with a Python that has cbor2 (Debian: python3-cbor2):

    python3 kvindex/testdata/vllm_sha256_cbor.py
"""
import hashlib

import cbor2


def sha256_cbor(obj):
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def block_hashes(seed, tokens, block_size, lora=None, salt=None):
    none_hash = sha256_cbor(seed)  # init_none_hash: hash_fn(PYTHONHASHSEED)
    parent = None
    out = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        extra = []
        if lora:
            extra.append(lora)  # _gen_lora_extra_hash_keys
        if start == 0 and salt:
            extra.append(salt)  # cache_salt on the first block only
        extra_keys = tuple(extra) if extra else None
        block = tuple(tokens[start:start + block_size])
        parent = sha256_cbor((parent or none_hash, block, extra_keys))
        out.append(int.from_bytes(parent, "big") & ((1 << 64) - 1))
    return out


CASES = [
    ("0", list(range(1, 33)), 16, None, None),
    ("0", [128000, 9906, 11, 1917, 0, 70000, 65535, 65536, 23, 24, 255, 256, 4294967295, 1, 2, 3] * 3, 16, None, None),
    ("42", list(range(100, 164)), 16, "sql-lora", None),
    ("42", list(range(100, 164)), 16, None, "tenant-a"),
    ("42", list(range(100, 164)), 16, "sql-lora", "tenant-a"),
    ("vllm-none-hash", list(range(7, 7 + 48)), 16, None, None),
    ("0", list(range(1, 11)), 4, None, None),
]

if __name__ == "__main__":
    print("NONE_HASH('0') =", sha256_cbor("0").hex())
    for seed, tokens, bs, lora, salt in CASES:
        print(repr(seed), bs, repr(lora), repr(salt), block_hashes(seed, tokens, bs, lora, salt))
