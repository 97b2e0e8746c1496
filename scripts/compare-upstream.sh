#!/usr/bin/env bash
# compare-upstream.sh - the bytes Tessel's partitioner moves against upstream
# MLIR's sharding-propagation + shard-partition, on the models of
# docs/upstream-comparison/ (see docs/upstream-comparison.md).
#
#   scripts/compare-upstream.sh                  the tables, as Markdown
#   scripts/compare-upstream.sh --update-doc     ... also written into the doc
#   scripts/compare-upstream.sh --upstream-only  one line per upstream run
#                                                (what test/Tools/upstream-
#                                                comparison.mlir checks)
#
# Upstream runs once per traversal order of sharding-propagation on each
# model, its grid rewritten to the mesh (grid axis 0 is dp, axis 1 is tp):
#   mlir-opt --pass-pipeline='builtin.module(func.func(
#     sharding-propagation{traversal=T},shard-partition,cse))'
# (cse, as tessel-compile runs CSE after its partitioner). Tessel runs
#   tessel-compile MODEL --mesh M FLAGS --emit=mlir --report-json
# and one step's collectives are read from the report. Bytes are counted the
# same way on both sides, as the runtime's counters count them (passes/
# Communication.h): an all_reduce, reduce_scatter or all_to_all its input,
# an all_gather its output; all_slice (a local slice) and collectives over a
# group of one move nothing and are left out. Ring bytes: 2(G-1)/G of an
# all-reduce's payload, (G-1)/G of the others'.
#
# Environment: MLIR_OPT (default: mlir-opt on PATH, else
# /usr/lib/llvm-22/bin/mlir-opt), TESSEL_BUILD_DIR (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=tables
update_doc=false
for arg in "$@"; do
  case "$arg" in
  --upstream-only) mode=upstream ;;
  --update-doc) update_doc=true ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "compare-upstream.sh: unknown argument '$arg' (see --help)" >&2
    exit 2
    ;;
  esac
done

MLIR_OPT=${MLIR_OPT:-$(command -v mlir-opt || echo /usr/lib/llvm-22/bin/mlir-opt)}
BUILD_DIR=${TESSEL_BUILD_DIR:-build}
# A crash's stack trace without the symbolizer (seconds per crash).
export LLVM_DISABLE_SYMBOLIZATION=1
TESSEL_COMPILE="$BUILD_DIR/bin/tessel-compile"
INPUTS=docs/upstream-comparison
DOC=docs/upstream-comparison.md

# name | upstream input | Tessel input | tessel-compile flags
CASES=(
  "mlp forward|$INPUTS/mlp.upstream.mlir|examples/mlp.mlir|--no-train"
  "mlp forward+backward|$INPUTS/mlp_train.upstream.mlir|examples/mlp.mlir|--bucket-mb 0"
  "gpt block forward|$INPUTS/gpt_block.upstream.mlir|$INPUTS/gpt_block.nn.mlir|--no-train"
  "gpt block forward+backward|$INPUTS/gpt_block_train.upstream.mlir|$INPUTS/gpt_block.nn.mlir|--bucket-mb 0"
)
# Tessel's mesh | the upstream grid's shape (axis 0 dp, axis 1 tp)
MESHES=("tp=2|1x2" "dp=2|2x1" "dp=2,tp=2|2x2")
# The first is upstream's default.
TRAVERSALS=(backward-forward forward-backward backward forward)

if [[ ! -x "$MLIR_OPT" ]] && ! command -v "$MLIR_OPT" >/dev/null; then
  echo "compare-upstream.sh: no mlir-opt at '$MLIR_OPT' (set MLIR_OPT)" >&2
  exit 1
fi
if [[ $mode == tables && ! -x "$TESSEL_COMPILE" ]]; then
  echo "compare-upstream.sh: no $TESSEL_COMPILE (build it, or set TESSEL_BUILD_DIR)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Why a run failed, in one line: the first error, or the crashing function.
failure_of() {
  local log=$1 rc=$2
  local error
  error=$(grep -m1 -E 'error:' "$log" | sed -E 's/^[^:]*:[0-9]+:[0-9]+: //' || true)
  if [[ -n $error ]]; then
    echo "$error"
    return
  fi
  local frame
  frame=$(grep -m1 -oE 'mlir::[A-Za-z_:]+\(' "$log" | sed 's/($//' || true)
  if [[ $rc -gt 128 ]]; then
    echo "crash (signal $((rc - 128)))${frame:+ in $frame}"
  else
    echo "exit status $rc"
  fi
}

# Runs a command ($2...) with its output in the log $1, and prints its exit
# status; in a subshell, so that a crash is reported into the log.
run_logged() {
  local log=$1
  shift
  (
    rc=0
    "$@" || rc=$?
    echo "exit $rc"
  ) >"$log" 2>&1
  sed -n 's/^exit //p' "$log" | tail -n 1
}

# The manifest that the report below reads, a line per run: side, model,
# mesh, grid shape, traversal, then "ok" and the output file or "failed"
# and why.
manifest="$work/manifest.tsv"
: >"$manifest"
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$manifest"
}

# The upstream inputs, one per model and mesh, as chunks of one file:
# mlir-opt's start-up is most of a run's time, so each traversal runs once
# over all of them (--split-input-file).
chunks=()
batch="$work/batch.mlir"
: >"$batch"
for case in "${CASES[@]}"; do
  IFS='|' read -r name upstream_input tessel_input flags <<<"$case"
  for mesh_entry in "${MESHES[@]}"; do
    IFS='|' read -r mesh shape <<<"$mesh_entry"
    input="$work/input${#chunks[@]}.mlir"
    sed -E "s/shard\.grid @mesh\(shape = [0-9x]+\)/shard.grid @mesh(shape = $shape)/" \
      "$upstream_input" >"$input"
    [[ ${#chunks[@]} -eq 0 ]] || printf '\n// -----\n' >>"$batch"
    cat "$input" >>"$batch"
    chunks+=("$name|$mesh|$shape|$input")
  done
done

for traversal in "${TRAVERSALS[@]}"; do
  pipeline="builtin.module(func.func(sharding-propagation{traversal=$traversal},shard-partition,cse))"
  out="$work/$traversal.mlir"
  rc=$(run_logged "$work/$traversal.log" "$MLIR_OPT" "$batch" --split-input-file \
    --pass-pipeline="$pipeline" -o "$out")
  if [[ $rc -eq 0 ]]; then
    # One output chunk per input chunk, in order.
    awk -v prefix="$work/$traversal." '
      BEGIN { n = 0; file = prefix n ".mlir" }
      /^\/\/ -----$/ { n++; file = prefix n ".mlir"; next }
      { print > file }' "$out"
  fi
  for i in "${!chunks[@]}"; do
    IFS='|' read -r name mesh shape input <<<"${chunks[$i]}"
    partitioned="$work/$traversal.$i.mlir"
    if [[ $rc -ne 0 ]]; then
      # Somewhere the traversal failed: this input alone says whether here.
      one_rc=$(run_logged "$work/$traversal.$i.log" "$MLIR_OPT" "$input" \
        --pass-pipeline="$pipeline" -o "$partitioned")
      if [[ $one_rc -ne 0 ]]; then
        record upstream "$name" "$mesh" "$shape" "$traversal" failed \
          "$(failure_of "$work/$traversal.$i.log" "$one_rc")"
        continue
      fi
    fi
    record upstream "$name" "$mesh" "$shape" "$traversal" ok "$partitioned"
  done
done

if [[ $mode == tables ]]; then
  n=0
  for case in "${CASES[@]}"; do
    IFS='|' read -r name upstream_input tessel_input flags <<<"$case"
    for mesh_entry in "${MESHES[@]}"; do
      IFS='|' read -r mesh shape <<<"$mesh_entry"
      n=$((n + 1))
      # shellcheck disable=SC2086 # flags are words
      rc=$(run_logged "$work/tessel$n.log" "$TESSEL_COMPILE" "$tessel_input" --mesh "$mesh" \
        $flags --emit=mlir -o "$work/tessel$n.mlir" --report-json "$work/tessel$n.json")
      if [[ $rc -eq 0 ]]; then
        record tessel "$name" "$mesh" "$shape" - ok "$work/tessel$n.json"
      else
        record tessel "$name" "$mesh" "$shape" - failed "$(failure_of "$work/tessel$n.log" "$rc")"
      fi
    done
  done
fi

python3 - "$manifest" "$mode" "$update_doc" "$DOC" <<'PY'
import json, re, sys
from math import prod
path, mode, update_doc, doc = sys.argv[1:5]

ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "i1": 1}
KINDS = ("all_reduce all_gather all_slice all_to_all reduce_scatter broadcast gather "
         "scatter reduce send recv shift update_halo").split()

def tensor_bytes(text):
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", text)
    return prod(int(d) for d in m.group(1).split("x") if d) * ELEMENT_BYTES[m.group(2)]

def count_upstream(path, shape):
    """The shard collectives of partitioned IR, per kind and grid axes."""
    shape = [int(s) for s in shape.split("x")]
    names = ["dp", "tp"]
    rows = {}
    for line in open(path):
        m = re.search(r"shard\.(%s)\b(.*)" % "|".join(KINDS), line)
        if not m:
            continue
        kind, rest = m.groups()
        axes = re.search(r"grid_axes = \[([\d, ]*)\]", rest)
        axes = [int(a) for a in axes.group(1).split(",") if a.strip()] if axes else []
        if kind == "all_slice" or prod(shape[a] for a in axes) == 1:
            continue  # moves nothing
        types = re.search(r": (tensor<[^>]*>) -> (tensor<[^>]*>)", rest)
        if kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") and types:
            payload = tensor_bytes(types.group(2 if kind == "all_gather" else 1))
        else:
            payload = None  # not one of the runtime's four: counted, bytes unknown
        key = (kind, tuple(names[a] for a in axes))
        row = rows.setdefault(key, {"kind": kind, "axes": list(key[1]), "calls": 0, "bytes": 0})
        row["calls"] += 1
        row["bytes"] = None if payload is None or row["bytes"] is None else row["bytes"] + payload
    return list(rows.values())

runs = []
for line in open(path):
    side, model, mesh, shape, traversal, status, detail = line.rstrip("\n").split("\t", 6)
    run = {"side": side, "model": model, "mesh": mesh, "traversal": traversal}
    if status != "ok":
        run["failure"] = detail
    elif side == "upstream":
        run["collectives"] = count_upstream(detail, shape)
    else:
        run["report"] = json.load(open(detail))
    runs.append(run)
ORDER = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]

def ring(kind, payload, group):
    if payload is None or group <= 1:
        return 0
    steps = 2 * (group - 1) if kind == "all_reduce" else group - 1
    return payload * steps // group

def group_size(mesh, axes):
    sizes = dict(entry.split("=") for entry in mesh.split(","))
    size = 1
    for axis in axes:
        size *= int(sizes.get(axis, 1))
    return size

def collectives_of(run):
    """[(kind, axes tuple, calls, bytes)] of a run, or None if it failed."""
    if "failure" in run:
        return None
    if run["side"] == "upstream":
        rows = run["collectives"]
        return sorted(((r["kind"], tuple(r["axes"]), r["calls"], r["bytes"]) for r in rows),
                      key=lambda r: (ORDER.index(r[0]) if r[0] in ORDER else 9, r[1]))
    comm = run["report"].get("communication")
    if not comm:
        return []
    entries = comm["step"]["entries"]
    merged = {}
    for r in comm["collectives"]:
        if r["entry"] not in entries:
            continue
        key = (r["kind"], tuple(r["axes"]))
        calls, payload = merged.get(key, (0, 0))
        merged[key] = (calls + r["calls"], payload + r["bytes"])
    return sorted(((k, a, c, b) for (k, a), (c, b) in merged.items()),
                  key=lambda r: (ORDER.index(r[0]) if r[0] in ORDER else 9, r[1]))

def totals(rows, mesh):
    payload = sum(b or 0 for _, _, _, b in rows)
    wire = sum(ring(k, b, group_size(mesh, a)) for k, a, _, b in rows)
    return payload, wire

def describe(rows):
    return "; ".join(f"{k} {','.join(a)} {c}x {b if b is not None else '?'}" for k, a, c, b in rows) or "none"

models, meshes = [], []
for run in runs:
    if run["model"] not in models:
        models.append(run["model"])
    if run["mesh"] not in meshes:
        meshes.append(run["mesh"])

if mode == "upstream":
    traversals = ["backward-forward", "forward-backward", "backward", "forward"]
    runs.sort(key=lambda r: (models.index(r["model"]), meshes.index(r["mesh"]),
                             traversals.index(r["traversal"])))
    for run in runs:
        rows = collectives_of(run)
        head = f"{run['model']} | {run['mesh']} | {run['traversal']}:"
        if rows is None:
            print(head, "FAILED", run["failure"])
        else:
            print(head, describe(rows), "| total", totals(rows, run["mesh"])[0])
    sys.exit(0)

def cell(rows, mesh):
    payload, wire = totals(rows, mesh)
    parts = [f"{k} {','.join(a)} {c}× {b:,} B" for k, a, c, b in rows]
    return "<br>".join(parts + [f"**{payload:,} B** (ring {wire:,} B)"]) if parts else "none<br>**0 B**"

def find(side, model, mesh, traversal="-"):
    for run in runs:
        if (run["side"], run["model"], run["mesh"], run["traversal"]) == (side, model, mesh, traversal):
            return run
    return None

def failure_cell(run):
    return "fails: " + (run["failure"] if run else "not run").replace("|", "\\|")

TRAVERSALS = ["backward-forward", "forward-backward", "backward", "forward"]
main = ["| model | mesh | upstream, default traversal (backward-forward) "
        "| upstream, the traversal with the fewest bytes | Tessel | Tessel against that |",
        "| --- | --- | --- | --- | --- | --- |"]
per_traversal = ["| model | mesh | " + " | ".join(TRAVERSALS) + " |",
                 "| --- | --- | " + " | ".join("---" for _ in TRAVERSALS) + " |"]
more_in_total, more_in_one = [], []
for model in models:
    for mesh in meshes:
        up = {t: find("upstream", model, mesh, t) for t in TRAVERSALS}
        ok = {t: collectives_of(r) for t, r in up.items() if r and "failure" not in r}
        best = min(ok, key=lambda t: (totals(ok[t], mesh), TRAVERSALS.index(t))) if ok else None
        tessel = find("tessel", model, mesh)
        ours = collectives_of(tessel) if tessel else None
        default_cell = cell(ok["backward-forward"], mesh) if "backward-forward" in ok \
            else failure_cell(up["backward-forward"])
        best_cell = f"({best})<br>" + cell(ok[best], mesh) if best else "every traversal fails"
        ours_cell = cell(ours, mesh) if ours is not None else failure_cell(tessel)
        verdict = "n/a"
        if ours is not None and best:
            (ours_payload, ours_ring), (best_payload, best_ring) = totals(ours, mesh), totals(ok[best], mesh)
            min_ring = min(totals(rows, mesh)[1] for rows in ok.values())
            if ours_payload > best_payload or ours_ring > min_ring:
                verdict = f"**more: {ours_payload - best_payload:+,} B (ring {ours_ring - min_ring:+,} B)**"
                more_in_total.append(f"{model}, {mesh}: Tessel {ours_payload:,} B (ring {ours_ring:,} B), "
                                     f"upstream at best {best_payload:,} B ({best}; ring {min_ring:,} B)")
            elif ours_payload == best_payload and ours_ring == best_ring:
                verdict = "equal"
            else:
                verdict = f"{best_payload - ours_payload:,} B fewer"
            # One collective (a kind over a group) where Tessel moves more
            # than an upstream traversal, whatever the totals say; the
            # traversals that insert the same collectives together.
            same = {}
            for t, rows in ok.items():
                same.setdefault(tuple(rows), []).append(t)
            for rows, names in same.items():
                theirs = {(k, a): b or 0 for k, a, _, b in rows}
                for k, a, _, b in ours:
                    if b > theirs.get((k, a), 0):
                        more_in_one.append(
                            f"{model}, {mesh}: {k} over {','.join(a)}: Tessel {b:,} B, upstream "
                            f"({', '.join(names)}) {theirs.get((k, a), 0):,} B; in total Tessel "
                            f"{ours_payload:,} B, upstream {totals(list(rows), mesh)[0]:,} B")
        main.append(f"| {model} | {mesh} | {default_cell} | {best_cell} | {ours_cell} | {verdict} |")
        cells = [f"{totals(ok[t], mesh)[0]:,} B" if t in ok else failure_cell(up[t]) for t in TRAVERSALS]
        per_traversal.append(f"| {model} | {mesh} | " + " | ".join(cells) + " |")

def bullets(lines):
    return " none.\n" if not lines else "\n\n" + "".join(f"- {line}\n" for line in lines)

text = "\n".join(main) + "\n\nEach traversal order of upstream (payload bytes per rank):\n\n"
text += "\n".join(per_traversal) + "\n"
text += "\nCases where Tessel moves more in total than upstream's best traversal:" + bullets(more_in_total)
text += "\nCollectives where Tessel moves more than one upstream traversal:" + bullets(more_in_one)
print(text, end="")
if update_doc == "true":
    begin, end = "<!-- BEGIN compare-upstream.sh -->", "<!-- END compare-upstream.sh -->"
    content = open(doc).read()
    if begin not in content or end not in content:
        sys.exit(f"compare-upstream.sh: {doc} has no '{begin}' ... '{end}' block")
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    open(doc, "w").write(head + begin + "\n" + text + end + tail)
PY
