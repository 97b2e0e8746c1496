#!/usr/bin/env bash
# Builds the launcher's file readers with libFuzzer and AddressSanitizer
# (clang: -fsanitize=fuzzer,address; the readers instrumented, the runtime
# library as built) and fuzzes them for a bounded time from a seed corpus of
# valid files: a model description, a safetensors checkpoint and a .npy
# token file (test/fuzz/ReaderFuzzer.cpp). Prints executions and findings;
# exits non-zero on a finding (its input is left in the output folder).
#   scripts/fuzz.sh [SECONDS]   (default 60; CI runs 20; FUZZ_SEED=N to
#   explore from another seed than 1)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
out="$BUILD_DIR/fuzz"
mkdir -p "$out/corpus" "$out/findings"
CLANG=${CLANG:-$(command -v clang++ || true)}
if [ -z "$CLANG" ]; then
  echo "fuzz: clang++ not found (install clang)" >&2
  exit 1
fi
[ -f "$BUILD_DIR/lib/libtessel_runtime.so" ] || cmake --build "$BUILD_DIR" --target tessel_runtime

# The readers and what they call, instrumented; the runtime library linked.
"$CLANG" -std=c++17 -O1 -g -fsanitize=fuzzer,address \
  -I. -Iruntime/include \
  test/fuzz/ReaderFuzzer.cpp runtime/launcher/*.cpp runtime/config/*.cpp \
  -L"$BUILD_DIR/lib" -ltessel_runtime -Wl,-rpath,"$PWD/$BUILD_DIR/lib" \
  -ldl -lpthread -o "$out/reader-fuzzer"

# Seeds: the first byte picks the reader (0 description, 1 safetensors,
# 2 .npy), the rest is a valid file.
python3 - "$out/corpus" <<'PY'
import json, struct, sys, os
out = sys.argv[1]
desc = open("test/launcher/FakeLmDescription.h").read()
desc = desc[desc.index('R"(') + 3:desc.index(')";')]
open(os.path.join(out, "description"), "wb").write(b"\0" + desc.encode())
header = {"embed": {"dtype": "F32", "shape": [16, 8], "data_offsets": [0, 512]},
          "head": {"dtype": "F32", "shape": [8, 16], "data_offsets": [512, 1024]},
          "__metadata__": {"format": "pt"}}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
st = struct.pack("<Q", len(text)) + text + bytes(1024)
open(os.path.join(out, "checkpoint"), "wb").write(b"\1" + st)
npy_header = "{'descr': '<u2', 'fortran_order': False, 'shape': (64,), }"
npy_header += " " * (-(10 + len(npy_header) + 1) % 64) + "\n"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(npy_header)) + npy_header.encode()
npy += struct.pack("<64H", *range(64))
open(os.path.join(out, "tokens"), "wb").write(b"\2" + npy)
PY

log="$out/fuzz.log"
status=0
"$out/reader-fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 \
  -seed="${FUZZ_SEED:-1}" \
  -artifact_prefix="$out/findings/" "$out/corpus" >"$log" 2>&1 || status=$?
runs=$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1 || true)
echo "fuzz: reader-fuzzer ran ${runs:-?} inputs in ${seconds} s; corpus $(ls "$out/corpus" | wc -l) files"
if [ "$status" -ne 0 ]; then
  echo "fuzz: FINDING (see $log and $out/findings/):" >&2
  grep -E "ERROR|SUMMARY|terminate|Assertion" "$log" | head -5 >&2
  exit 1
fi
echo "fuzz: no findings"
