#!/usr/bin/env python3
"""Checks a pinpool timeline trace against what the pool counted.

    tests/trace/check_trace.py TRACE.json RESULT_LINE_FILE

RESULT_LINE_FILE holds the demo's output with --result and --trace: its
trace_loads=lo-hi and trace_written=lo-hi are the pool's loads and
evictions written just before pp_trace_stop and just after, so the trace
must hold between lo and hi successful loads, and at least lo successful
write-backs (one that a pin beat after its write is abandoned: it is in
the trace, not in the count).  The checks:

- the file is one JSON object with traceEvents, and no event was dropped;
- every X event has a name, pid, tid, and numeric ts and dur >= 0;
- each load appears once: no two successful load spans of one entry start
  at the same time, and their number is within the pool's count;
- counters are monotone in ts per track (name);
- every track an event is on is named by an M thread_name event, and the
  process is named;
- every flow end ("f") follows a flow start ("s") of the same id.
Exit status 0, or 1 with every failed check printed.
"""
import json
import re
import sys
from collections import defaultdict


def main():
    trace_path, out_path = sys.argv[1], sys.argv[2]
    errors = []
    with open(trace_path) as f:
        trace = json.load(f)
    with open(out_path) as f:
        out = f.read()
    m = re.search(r"trace_loads=(\d+)-(\d+) trace_written=(\d+)-(\d+)", out)
    if not m:
        print(f"check_trace: no trace_loads=lo-hi in {out_path}")
        return 1
    loads_lo, loads_hi, written_lo, written_hi = map(int, m.groups())

    events = trace.get("traceEvents")
    if not isinstance(events, list) or not events:
        errors.append("no traceEvents list")
        events = []
    dropped = trace.get("otherData", {}).get("events_dropped")
    if dropped != "0":
        errors.append(f"events dropped: {dropped!r}")

    names = {}
    process_named = False
    used = set()
    loads = []
    written = 0
    counters = defaultdict(list)
    flows = defaultdict(list)
    for ev in events:
        ph = ev.get("ph")
        if ph == "M":
            if ev.get("name") == "thread_name":
                names[(ev["pid"], ev["tid"])] = ev["args"]["name"]
            elif ev.get("name") == "process_name":
                process_named = True
            continue
        if ph == "X":
            for key in ("name", "pid", "tid", "ts", "dur"):
                if key not in ev:
                    errors.append(f"X event without {key}: {ev}")
            if not isinstance(ev.get("ts"), (int, float)) or not isinstance(
                    ev.get("dur"), (int, float)) or ev["dur"] < 0:
                errors.append(f"X event with a bad ts or dur: {ev}")
                continue
            used.add((ev["pid"], ev["tid"]))
            ok = ev.get("args", {}).get("result") == "PP_OK"
            if ev["name"] == "load" and ok:
                loads.append((ev["args"]["ref"], ev["ts"]))
            if ev["name"] == "write-back" and ok:
                written += 1
        elif ph == "C":
            counters[ev["name"]].append(ev["ts"])
        elif ph in ("s", "f"):
            used.add((ev["pid"], ev["tid"]))
            flows[ev["id"]].append((ev["ts"], ph))

    if len(set(loads)) != len(loads):
        errors.append(f"{len(loads) - len(set(loads))} loads appear twice")
    if not loads_lo <= len(loads) <= loads_hi:
        errors.append(f"{len(loads)} successful loads in the trace, the pool counted "
                      f"{loads_lo} to {loads_hi}")
    if written < written_lo:
        errors.append(f"{written} successful write-backs in the trace, the pool counted "
                      f"{written_lo} evictions written")
    if not counters:
        errors.append("no counters")
    for name, ts in counters.items():
        if any(b < a for a, b in zip(ts, ts[1:])):
            errors.append(f"counter {name!r} goes back in time")
    if not process_named:
        errors.append("the process is not named")
    for track in sorted(used - set(names)):
        errors.append(f"track {track} has events but no thread_name")
    for fid, marks in flows.items():
        marks.sort(key=lambda m: (m[0], m[1] != "s"))
        open_ = 0
        for _, ph in marks:
            open_ += 1 if ph == "s" else -1
            if open_ < 0:
                errors.append(f"flow {fid} ends before it starts")
                break

    for e in errors[:20]:
        print("check_trace:", e)
    if errors:
        return 1
    print(f"check_trace: ok: {len(events)} events, {len(loads)} loads (pool: {loads_lo}-"
          f"{loads_hi}), {written} write-backs (pool: {written_lo}-{written_hi}), "
          f"{len(counters)} counter tracks, {len(names)} named tracks, {len(flows)} flows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
