"""Checks a tessel-run --trace file (Chrome trace event format).

usage: check_trace.py TRACE RANKS STEP BYTES

Prints one line per rank with what the trace holds, for FileCheck, after
checking what every trace must satisfy: each rank's process is named with
the traced step, every event is a complete event with a start and a
non-negative duration, kernels and waits are on thread 0 and collectives
on thread 1, and each rank's collectives move BYTES bytes.
"""
import collections
import json
import sys

path, ranks, step, total = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
trace = json.load(open(path))
events = trace["traceEvents"]
names = {}
per_rank = collections.defaultdict(list)
for e in events:
    if e["ph"] == "M":
        if e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
        continue
    assert e["ph"] == "X", e
    assert e["ts"] >= 0 and e["dur"] >= 0, e
    thread = 1 if e["cat"] == "collective" else 0
    assert e["tid"] == thread, e
    per_rank[e["pid"]].append(e)

assert sorted(per_rank) == list(range(ranks)), sorted(per_rank)
for rank in range(ranks):
    assert names[rank] == "rank %d, step %s" % (rank, step), names[rank]
    evs = per_rank[rank]
    collectives = [e for e in evs if e["cat"] == "collective"]
    moved = sum(e["args"]["bytes"] for e in collectives)
    assert moved == total, (rank, moved, total)
    started = [e for e in collectives if e["args"]["started"]]
    print("rank %d: %d kernels, %d collectives (%d started), %d waits, %d bytes"
          % (rank, sum(e["cat"] == "kernel" for e in evs), len(collectives),
             len(started), sum(e["cat"] == "wait" for e in evs), moved))
