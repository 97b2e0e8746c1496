#!/usr/bin/env bash
# Builds two libFuzzer + AddressSanitizer targets with clang and fuzzes each
# for half the given time from a seed corpus:
#  - reader-fuzzer (test/fuzz/ReaderFuzzer.cpp): the launcher's file
#    readers (the readers instrumented, the runtime library as built), from
#    a model description, a safetensors checkpoint and a .npy token file;
#  - compile-fuzzer (test/fuzz/CompileFuzzer.cpp): parse, verify and the
#    whole compile pipeline on a mesh the first byte picks, with the nn
#    dialect and every pass compiled in and instrumented (assertions on;
#    libMLIR as Debian built it), from the examples and test inputs.
# Prints executions and findings; exits non-zero on a finding (its input is
# left in the target's findings folder).
#   scripts/fuzz.sh [SECONDS]   (default 60; FUZZ_SEED=N to explore from
#   another seed than 1; FUZZ_TARGETS="reader compile" to pick)
#   FUZZ_RUNS="reader:N compile:M" runs a fixed number of inputs per target
#   instead (SECONDS then only caps each): with the fixed seed the same
#   inputs every time, so CI is reproducible: what passes here passes there.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
out="$BUILD_DIR/fuzz"
targets=${FUZZ_TARGETS:-reader compile}
CLANG=${CLANG:-$(command -v clang++ || true)}
if [ -z "$CLANG" ]; then
  echo "fuzz: clang++ not found (install clang)" >&2
  exit 1
fi
[ -f "$BUILD_DIR/lib/libtessel_runtime.so" ] || cmake --build "$BUILD_DIR" --target tessel_runtime

jobs=$(nproc)
ccache=$(command -v ccache || true)
status=0
# One target's run: its corpus, its log, its findings; status 1 on a finding.
run_target() {
  local name=$1 time=$2 dir=$3
  local log="$dir/fuzz.log" rc=0 dict=() runLimit=() start=$SECONDS
  [ -f "$dir/dict" ] && dict=(-dict="$dir/dict")
  local count
  count=$(tr ' ' '\n' <<<"${FUZZ_RUNS:-}" | sed -n "s/^${name%-fuzzer}://p")
  [ -n "$count" ] && runLimit=(-runs="$count")
  "$dir/$name" -max_total_time="$time" -rss_limit_mb=4096 -timeout=30 \
    -seed="${FUZZ_SEED:-1}" -artifact_prefix="$dir/findings/" "${dict[@]}" \
    "${runLimit[@]}" "$dir/corpus" >"$log" 2>&1 || rc=$?
  local runs
  runs=$(grep -Eo 'Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1 || true)
  echo "fuzz: $name ran ${runs:-?} inputs in $(( SECONDS - start )) s; corpus $(ls "$dir/corpus" | wc -l) files"
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $name FINDING (see $log and $dir/findings/):" >&2
    grep -E "ERROR|SUMMARY|terminate|Assertion|LLVM ERROR" "$log" | head -5 >&2
    status=1
  fi
}
count=$(wc -w <<<"$targets")
share=$(( seconds / count > 0 ? seconds / count : 1 ))

build_reader() {
  local dir="$out/reader"
  mkdir -p "$dir/corpus" "$dir/findings"
# The readers and what they call, instrumented; the runtime library linked.
"$CLANG" -std=c++17 -O1 -g -fsanitize=fuzzer,address \
  -I. -Iruntime -Iruntime/include \
  test/fuzz/ReaderFuzzer.cpp runtime/launcher/*.cpp runtime/config/*.cpp \
  -L"$BUILD_DIR/lib" -ltessel_runtime -Wl,-rpath,"$PWD/$BUILD_DIR/lib" \
  -ldl -lpthread -o "$dir/reader-fuzzer"

# Seeds: the first byte picks the reader (0 description, 1 safetensors,
# 2 .npy), the rest is a valid file.
python3 - "$dir/corpus" <<'PY'
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

}

# The compile fuzzer: the dialect, the passes and tessel_config compiled
# with clang and instrumented (objects kept in $out/compile/obj, through
# ccache when there is one), linked with the fuzzer against libMLIR/libLLVM.
build_compile() {
  local dir="$out/compile"
  mkdir -p "$dir/corpus" "$dir/findings" "$dir/obj"
  cmake --build "$BUILD_DIR" --target TesselNNIncGen TesselPassesIncGen >/dev/null
  local llvm=/usr/lib/llvm-22
  local flags=(-std=c++17 -O1 -g1 -fsanitize=fuzzer-no-link,address
    -D_GLIBCXX_USE_CXX11_ABI=1 -D__STDC_CONSTANT_MACROS
    -D__STDC_FORMAT_MACROS -D__STDC_LIMIT_MACROS -w
    -I"$llvm/include" -I. -I"$BUILD_DIR" -Iruntime -Iruntime/include)
  local start=$SECONDS src obj
  # Stale objects (older than their source or any header) rebuilt, $jobs
  # at a time.
  local newest
  newest=$(ls -t dialect/NN/*.h dialect/NN/*.td passes/*.h passes/*.td \
    passes/lowering/*.h runtime/config/*.h runtime/config/*.def \
    tools/ToolStack.h | head -1)
  for src in dialect/NN/*.cpp passes/*.cpp passes/lowering/*.cpp \
      runtime/config/*.cpp test/fuzz/CompileFuzzer.cpp; do
    obj="$dir/obj/$(echo "${src%.cpp}" | tr / _).o"
    if [ ! "$obj" -nt "$src" ] || [ ! "$obj" -nt "$newest" ]; then
      echo "$src $obj"
    fi
  done | FUZZ_CXX="$ccache $CLANG ${flags[*]}" xargs -r -P "$jobs" -n 2 \
    sh -c 'exec $FUZZ_CXX -c "$0" -o "$1"'
  "$CLANG" "${flags[@]/-fsanitize=fuzzer-no-link,address/-fsanitize=fuzzer,address}" \
    "$dir"/obj/*.o \
    -L"$llvm/lib" -lMLIR -lLLVM -Wl,-rpath,"$llvm/lib" -lpthread \
    -o "$dir/compile-fuzzer"
  echo "fuzz: compile-fuzzer built in $(( SECONDS - start )) s"

  # Seeds: each example on every mesh; each case of a few pass and tool
  # tests on one device and on dp=2,tp=2. A dictionary: every nn op's and
  # attribute's name and the types and keywords models are written with.
  python3 - "$dir/corpus" "$dir/dict" <<'PY'
import glob, os, re, sys
out = sys.argv[1]
words = set()
for td in glob.glob("dialect/NN/*.td"):
    text = open(td).read()
    words |= {"nn." + m for m in re.findall(r'^def NN_\w+ : NN_\w+<"([a-z_0-9.]+)"', text, re.M)}
for src in glob.glob("dialect/NN/*.h") + glob.glob("dialect/NN/*.td") + glob.glob("passes/*.h"):
    words |= set(re.findall(r'"(nn\.[a-z_]+)"', open(src).read()))
words |= {"tensor<", "x", "f32", "f64", "f16", "bf16", "i64", "i32", "func.func @",
          "return", "-> ", "%arg0", "dense<", "#nn.", "module {", "} : ", "= "}
with open(sys.argv[2], "w") as f:
    for w in sorted(words):
        f.write('"%s"\n' % w.replace("\\", "\\\\").replace('"', '\\"'))
def seed(name, mesh, text):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mesh]) + text.encode())
for path in sorted(glob.glob("examples/*.mlir")):
    for mesh in range(5):
        seed(f"{os.path.basename(path)}.{mesh}", mesh, open(path).read())
tests = ["test/Passes/tessel-autodiff.mlir", "test/Passes/tessel-partition.mlir",
         "test/Passes/tessel-propagate-sharding.mlir",
         "test/Passes/tessel-pipeline-split.mlir",
         "test/Passes/tessel-partition-batchnorm.mlir",
         "test/Passes/tessel-partition-vocab.mlir",
         "test/Tools/tessel-compile.mlir", "test/Tools/tessel-compile-invalid.mlir"]
for path in tests:
    if not os.path.exists(path):
        continue
    for i, case in enumerate(open(path).read().split("// -----")):
        for mesh in (0, 3):
            seed(f"{os.path.basename(path)}.{i}.{mesh}", mesh, case)
PY
}

for target in $targets; do
  "build_$target"
done
for target in $targets; do
  run_target "$target-fuzzer" "$share" "$out/$target"
done
[ "$status" -eq 0 ] && echo "fuzz: no findings"
exit "$status"
