#!/usr/bin/env python3
"""Makes a glm4moe GGUF whose MTP block predicts exactly what the trunk will say (a benchmark
aid for `--spec mtp`, docs/performance.md#mtp-drafts: the speed of drafting when every draft is
accepted, which random weights cannot show). Same shapes, types and cost per token as the
input; only values change, in place in a copy:
  - every layer's attn_output, ffn_down, ffn_down_exps and ffn_down_shexp (the trunk's and the
    block's) become zero: each layer adds nothing, so the trunk's next token is a function of
    its last token (argmax of output . norm(embedding));
  - the block's eh_proj becomes [I 0] (the token's normed embedding passed through), its enorm
    ones, its embed_tokens / shared_head_head / shared_head_norm copies of token_embd / output /
    output_norm: it predicts that same function of the token it is given.
The test `Glm4MoeMtp.ABlockThatKnowsTheTrunkHasEveryDraftAccepted` builds the same file its own
way. Types handled for eh_proj: F32, F16, Q8_0, Q4_0.
usage: scripts/mtp_exact_block.py IN.gguf OUT.gguf
"""
import shutil
import struct
import sys

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}
# type id: (block elements, block bytes)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 13: (256, 176),
          14: (256, 210), 30: (1, 2)}


def read_gguf(path):
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(SCALARS[t])

    if buf[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    tensors = {}
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        ttype, offset = take("I"), take("Q")
        tensors[name] = (dims, ttype, offset)
    align = meta.get("general.alignment", 32)
    data = (pos + align - 1) // align * align
    return meta, tensors, data


def nbytes(dims, ttype):
    n = 1
    for d in dims:
        n *= d
    elems, size = BLOCKS[ttype]
    return n // elems * size


def identity_rows(dims, ttype):
    """[I 0] of rows dims[1], row length dims[0], in ttype."""
    cols, rows = dims[0], dims[1]
    if ttype == 0:
        out = bytearray(rows * cols * 4)
        for i in range(rows):
            struct.pack_into("<f", out, (i * cols + i) * 4, 1.0)
        return bytes(out)
    if ttype == 1:
        out = bytearray(rows * cols * 2)
        for i in range(rows):
            struct.pack_into("<e", out, (i * cols + i) * 2, 1.0)
        return bytes(out)
    if ttype in (8, 2):
        elems, size = BLOCKS[ttype]
        per_row = cols // elems * size
        out = bytearray(rows * per_row)
        for i in range(rows):
            at = i * per_row + (i // elems) * size
            j = i % elems
            if ttype == 8:  # d, 32 int8: value = d q
                struct.pack_into("<e", out, at, 1.0 / 127)
                out[at + 2 + j] = 127
            else:  # d, 16 bytes of nibbles (low: elements 0-15, high: 16-31): value = d (q - 8)
                struct.pack_into("<e", out, at, 1.0 / 7)
                for b in range(16):
                    out[at + 2 + b] = 0x88
                shift = 0 if j < 16 else 4
                out[at + 2 + j % 16] = (out[at + 2 + j % 16] & (0xF0 >> shift)) | (15 << shift)
        return bytes(out)
    sys.exit(f"eh_proj of type {ttype}: not handled (requantize to q8_0, q4_0, f16 or f32)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    meta, tensors, data = read_gguf(src)
    if meta.get("general.architecture") != "glm4moe" or not meta.get("glm4moe.nextn_predict_layers"):
        sys.exit(f"{src}: not a glm4moe file with an MTP block")
    nl = meta["glm4moe.block_count"] - meta["glm4moe.nextn_predict_layers"]
    b = f"blk.{nl}."
    shutil.copyfile(src, dst)
    with open(src, "rb") as f:
        raw = f.read()

    def bytes_of(name):
        dims, ttype, off = tensors[name]
        return raw[data + off:data + off + nbytes(dims, ttype)]

    with open(dst, "r+b") as f:
        def put(name, payload):
            dims, ttype, off = tensors[name]
            assert len(payload) == nbytes(dims, ttype), name
            f.seek(data + off)
            f.write(payload)

        for name, (dims, ttype, _) in tensors.items():
            if name.endswith(("attn_output.weight", "ffn_down.weight", "ffn_down_exps.weight",
                              "ffn_down_shexp.weight")):
                put(name, bytes(nbytes(dims, ttype)))
        dims, ttype, _ = tensors[b + "nextn.eh_proj.weight"]
        put(b + "nextn.eh_proj.weight", identity_rows(dims, ttype))
        put(b + "nextn.enorm.weight", struct.pack(f"<{dims[1]}f", *([1.0] * dims[1])))
        for mine, trunk in (("nextn.embed_tokens.weight", "token_embd.weight"),
                            ("nextn.shared_head_head.weight", "output.weight"),
                            ("nextn.shared_head_norm.weight", "output_norm.weight")):
            if b + mine in tensors:
                put(b + mine, bytes_of(trunk))
    print(f"wrote {dst}: the MTP block of {src} made exact (layers' outputs zero)")


if __name__ == "__main__":
    main()
