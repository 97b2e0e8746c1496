#!/usr/bin/env python3
"""examples/gpt.mlir at other sizes, for benchmarks.

  bench/gpt-model.py --batch 8 --seq 1024 --width 768 --heads 12 \
      --layers 12 --vocab 50304 > gpt124m.mlir

The example's shapes are rewritten dimension by dimension: batch 8, seq 64,
width 128, heads 4 of 32, MLP 512 (4 x width unless --mlp), vocabulary 256
and 4 layers; the residual projections' init std becomes 0.02/sqrt(2 L), as
GPT-2's. A 4 is the head count in a [batch, seq, heads, head_dim] shape and
the layer count elsewhere.
"""
import argparse
import math
import os
import re

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
for name, default in [("batch", 8), ("seq", 64), ("width", 128), ("heads", 4),
                      ("layers", 4), ("vocab", 256), ("mlp", 0)]:
    p.add_argument("--" + name, type=int, default=default)
a = p.parse_args()
if a.width % a.heads:
    p.error("--width must be a multiple of --heads")
mlp = a.mlp or 4 * a.width
dims = {"8": a.batch, "64": a.seq, "128": a.width, "32": a.width // a.heads,
        "512": mlp, "256": a.vocab, "4": a.layers}

def shape(m):
    parts = m.group(1).split("x")
    sizes, elem = parts[:-1], parts[-1]
    attention = len(sizes) == 4 and sizes[:2] == ["8", "64"]
    out = [str(a.heads) if attention and i == 2 else str(dims[s])
           for i, s in enumerate(sizes)]
    return "tensor<" + "x".join(out + [elem]) + ">"

src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                   "examples", "gpt.mlir")
text = open(src).read()
text = re.sub(r"tensor<((?:\d+x)+\w+)>", shape, text)
text = text.replace("0.0070710678118654752",
                    repr(0.02 / math.sqrt(2 * a.layers)))
print(text, end="")
