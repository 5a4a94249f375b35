#!/bin/bash
# demo_trace.sh DEMO OUT [demo options...] -- runs the demo with --trace
# OUT.json and --result, checks the trace against the pool's counts
# (check_trace.py) and that the picture OUT.json.png was drawn (where
# gnuplot is installed: .ci/deps installs it).
set -u
demo=$1 out=$2
shift 2
rm -f "$out.json" "$out.json.png" "$out.txt"
"$demo" "$@" --trace "$out.json" --result > "$out.txt" 2>&1
rc=$?
cat "$out.txt"
if [ $rc -ne 0 ]; then
    echo "demo_trace: the demo FAILED (exit $rc)"
    exit 1
fi
python3 "$(dirname "$0")/check_trace.py" "$out.json" "$out.txt" || exit 1
if command -v gnuplot > /dev/null && [ ! -s "$out.json.png" ]; then
    echo "demo_trace: no picture $out.json.png: FAILED"
    exit 1
fi
