#!/usr/bin/env python3
"""Draws a pinpool timeline trace as a PNG: resident memory, I/O in flight
and the swap device's MB/s over time, per node, with gnuplot.

    tools/trace_plot.py TRACE.json OUT.png [--title TEXT]

TRACE.json is what pp_trace_start, PINPOOL_TRACE or the demo's --trace
wrote (Chrome Trace Event JSON).  It reads the counter events ("node N
memory MB", "node N in flight MB", "node N swap MB/s"), writes them to a
temporary data file and runs gnuplot (Debian: gnuplot-nox).  Python's
standard library only.  Exit status: 0, or 1 with a message.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SERIES = [
    # (counter, arg, panel, label)
    ("memory MB", "resident", 1, "resident MB"),
    ("memory MB", "backlog", 1, "reclaim backlog MB"),
    ("in flight MB", "loads", 2, "loads in flight MB"),
    ("in flight MB", "write-outs", 2, "write-outs in flight MB"),
    ("swap MB/s", "read", 3, "read MB/s"),
    ("swap MB/s", "write", 3, "write MB/s"),
]


def counters(trace):
    """{(node, counter): [(seconds, args), ...]} from the C events."""
    out = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") != "C" or not ev.get("name", "").startswith("node "):
            continue
        node, _, counter = ev["name"][5:].partition(" ")
        out.setdefault((int(node), counter), []).append((float(ev["ts"]) / 1e6, ev["args"]))
    for samples in out.values():
        samples.sort(key=lambda s: s[0])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        print(f"trace_plot: cannot read {a.trace}: {e}", file=sys.stderr)
        return 1
    data = counters(trace)
    if not data:
        print(f"trace_plot: {a.trace} has no counters (was the run shorter than 10 ms?)",
              file=sys.stderr)
        return 1
    nodes = sorted({n for n, _ in data})
    title = a.title or os.path.basename(a.trace)
    with tempfile.TemporaryDirectory() as tmp:
        plots = {1: [], 2: [], 3: []}
        for node in nodes:
            for counter, arg, panel, label in SERIES:
                samples = data.get((node, counter))
                if not samples:
                    continue
                path = os.path.join(tmp, f"n{node}-{counter.replace(' ', '_').replace('/', '')}"
                                         f"-{arg}.dat")
                with open(path, "w") as f:
                    for t, args in samples:
                        f.write(f"{t:.6f} {args.get(arg, 0)}\n")
                name = label if len(nodes) == 1 else f"node {node} {label}"
                plots[panel].append(f"'{path}' using 1:2 with lines lw 1.5 title '{name}'")
        script = [
            "set terminal pngcairo size 1200,900 noenhanced",
            f"set output '{a.png}'",
            f"set multiplot layout 3,1 title '{title}'",
            "set grid",
            "set key outside right",
            "set lmargin 10",
            "set rmargin 32",
        ]
        ylabels = {1: "MB in memory", 2: "MB of I/O in flight", 3: "swap MB/s"}
        for panel in (1, 2, 3):
            script.append(f"set ylabel '{ylabels[panel]}'")
            script.append("set xlabel 'seconds'" if panel == 3 else "unset xlabel")
            if plots[panel]:
                script.append("plot " + ", ".join(plots[panel]))
            else:
                script.append("plot 0 notitle")
        script.append("unset multiplot")
        try:
            r = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                               capture_output=True)
        except OSError as e:
            print(f"trace_plot: cannot run gnuplot (Debian: gnuplot-nox): {e}", file=sys.stderr)
            return 1
        if r.returncode != 0:
            print(f"trace_plot: gnuplot failed: {r.stderr.strip()}", file=sys.stderr)
            return 1
    print(f"trace_plot: {a.png} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
