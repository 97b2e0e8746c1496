#!/usr/bin/env bash
# Registers, spills and stack of the CUDA kernels, as ptxas reports them
# while it builds them (-Xptxas=-v): the build's own nvcc commands run
# again into a scratch object (the build's objects are left alone), and
# the report is one row per kernel template, with its instantiations, the
# most registers any of them uses and the most bytes any of them spills or
# keeps on its stack. No GPU is needed.
#   scripts/cuda-resources.sh [PATTERN]   (TESSEL_BUILD_DIR as scripts/setup.sh)
# PATTERN: only the .cu files whose path matches it (grep -E), e.g.
# 'attention' or 'elementwise|norm'.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
pattern=${1:-.}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  echo "cuda-resources: no build in $BUILD_DIR (run scripts/setup.sh)" >&2
  exit 1
fi
commands=$(ninja -C "$BUILD_DIR" -t commands tessel_cuda 2>/dev/null |
  grep -E '/nvcc .* -c [^ ]+\.cu' | grep -E -- "-c [^ ]*($pattern)[^ ]*\.cu" || true)
if [ -z "$commands" ]; then
  echo "cuda-resources: no CUDA file of the build matches '$pattern'" \
    "(is the CUDA backend configured?)" >&2
  exit 1
fi
scratch=$(mktemp -d /tmp/tessel-ptxas-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
n=0
while read -r command; do
  n=$((n + 1))
  # The same flags, into a scratch object and dependency file.
  command=$(sed -E -e "s# -o [^ ]+# -o $scratch/$n.o#" \
    -e "s# -MF [^ ]+# -MF $scratch/$n.d#" <<<"$command")
  (cd "$BUILD_DIR" && eval "$command") >"$scratch/$n.log" 2>&1 || {
    tail -5 "$scratch/$n.log" >&2
    echo "cuda-resources: nvcc failed" >&2
    exit 1
  }
done <<<"$commands"
cat "$scratch"/*.log | python3 -c '
import collections, re, subprocess, sys
kernels = {}  # mangled name -> [registers, spill bytes, stack bytes]
current = None
for line in sys.stdin:
    m = re.search(r"Compiling entry function .(\S+). for", line)
    if m:
        current = m.group(1)
        kernels.setdefault(current, [0, 0, 0])
        continue
    m = re.search(r"Function properties for (\S+)", line)
    if m:
        current = m.group(1)
        continue
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and current in kernels:
        kernels[current][1] = max(int(m.group(2)), int(m.group(3)))
        kernels[current][2] = int(m.group(1))
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and current in kernels:
        kernels[current][0] = int(m.group(1))
names = list(kernels)
demangled = subprocess.run(["c++filt"], input="\n".join(names), text=True,
                           capture_output=True).stdout.splitlines()
def template(name):
    # "void ns::(anonymous namespace)::kernel<T, 64>(const T *, ...)" -> kernel
    name = name.replace("(anonymous namespace)::", "")
    if name.startswith("void "):
        name = name[5:]
    name = re.split(r"[<(]", name, maxsplit=1)[0]
    return name.split("::")[-1]
def arguments(name):
    # The template arguments of a demangled kernel, shortened.
    start = name.find("<")
    if start < 0:
        return ""
    depth = 0
    for i in range(start, len(name)):
        depth += {"<": 1, ">": -1}.get(name[i], 0)
        if depth == 0:
            break
    args = re.sub(r"\b[\w:]*::", "",
                  name[start + 1:i].replace("(anonymous namespace)::", ""))
    return args if len(args) <= 60 else args[:57] + "..."
rows = collections.defaultdict(lambda: [0, 0, 0, 0, (-1, -1), ""])
for mangled, plain in zip(names, demangled):
    regs, spill, stack = kernels[mangled]
    row = rows[template(plain)]
    row[0] += 1
    row[1] = max(row[1], regs)
    row[2] = max(row[2], spill)
    row[3] = max(row[3], stack)
    if (spill, regs) > row[4]:
        row[4], row[5] = (spill, regs), arguments(plain)
print("| kernel | instantiations | registers (most) | spill bytes (most) | stack bytes (most) | the most spilling (or registers) |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for name, (count, regs, spill, stack, _, worst) in sorted(rows.items(), key=lambda kv: (-kv[1][2], -kv[1][1], kv[0])):
    print("| %s | %d | %d | %d | %d | %s |" % (name, count, regs, spill, stack, worst.replace("|", "/")))
spilling = sum(1 for r in rows.values() if r[2] > 0)
print()
print("%d kernels in %d templates; %d templates spill." % (len(names), len(rows), spilling))
'
