"""Compares the tensors of two .safetensors files.

usage: compare_safetensors.py A B [TOLERANCE]

Prints the tensor count, the largest absolute difference over all
elements, and 'identical' when every byte of every tensor agrees, or
'within TOLERANCE' when the largest difference is at most TOLERANCE;
exits 1 when the two hold different names, dtypes or shapes, or differ by
more than TOLERANCE.
"""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    body = data[8 + size:]
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = (t["dtype"], tuple(t["shape"]), body[begin:end])
    return tensors


a, b = read(sys.argv[1]), read(sys.argv[2])
if {n: v[:2] for n, v in a.items()} != {n: v[:2] for n, v in b.items()}:
    print("different tensors")
    sys.exit(1)
def values(dtype, raw):
    if dtype == "BF16":  # the high half of an f32
        halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    fmt = {"F32": "f", "F64": "d"}[dtype]
    return struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw)


largest = 0.0
for name, (dtype, shape, raw) in a.items():
    xs, ys = values(dtype, raw), values(dtype, b[name][2])
    largest = max([largest] + [abs(x - y) for x, y in zip(xs, ys)])
identical = all(a[n][2] == b[n][2] for n in a)
verdict = ""
if identical:
    verdict = ", identical"
elif len(sys.argv) > 3 and largest <= float(sys.argv[3]):
    verdict = ", within " + sys.argv[3]
print("%d tensors, largest difference %.3g%s" % (len(a), largest, verdict))
if len(sys.argv) > 3 and largest > float(sys.argv[3]):
    sys.exit(1)
