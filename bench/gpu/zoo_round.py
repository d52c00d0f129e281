#!/usr/bin/env python3
"""Rounds every 32-bit resource blob of an MLIR text file (the zoo's TOSA
exports keep their f32 weights as dense_resource hex blobs) to 4 mantissa bits,
so that the model compresses about 4x: bench/gpu/zoo.sh sends zoo models this
way to a GPU machine, where the GPU's outputs are compared with the host's
for the same (rounded) weights. Standard library only.

  zoo_round.py IN.mlir OUT.mlir
"""
import array
import re
import sys

KEEP = 0xFFF00000  # sign, exponent and the top 3 stored mantissa bits


def round_blob(match):
    raw = bytes.fromhex(match.group(1))
    head, body = raw[:4], raw[4:]  # the blob's alignment, then its bytes
    if len(body) % 4:
        return match.group(0)
    words = array.array("I", body)
    for i, w in enumerate(words):
        if (w & 0x7F800000) == 0x7F800000:  # inf and NaN stay as they are
            continue
        # to nearest, ties to even; a carry into the exponent is the next binade
        words[i] = (w + 0x7FFFF + ((w >> 20) & 1)) & KEEP
    return '"0x' + (head + words.tobytes()).hex().upper() + '"'


def main():
    src, dst = sys.argv[1:3]
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(re.sub(r'"0x([0-9A-Fa-f]{16,})"', round_blob, text))


if __name__ == "__main__":
    main()
