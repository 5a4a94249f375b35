#!/usr/bin/env bash
# cmake/lsan_retry.sh -- how the asan build runs each test command (pinpool_test).
#
#   bash cmake/lsan_retry.sh <command> [<arg>...]
#
# Runs the command, then prints what it printed (stdout and stderr, in one
# stream) and exits with its status.  One exception: if the leak checker's
# own stop-the-world tracer crashed at exit ("Tracer caught signal N", then
# "has encountered a fatal error") and the output holds no report at all --
# no leak, no ASan error, no runtime error -- the command runs once more and
# that run is the result.  That crash is a fault of the sanitizer runtime
# (it happens at random in processes of any program, after the program's
# work is done; see docs/testing.md), not a finding, and it hides nothing:
# the tracer never got to look.  The first run's output is kept in
# $TMPDIR (or /tmp) and named on the first line of what is printed.
set -u
out=$(mktemp "${TMPDIR:-/tmp}/lsan-retry-XXXXXX") || exit 2
"$@" >"$out" 2>&1
rc=$?
if grep -q '^Tracer caught signal' "$out" &&
   grep -q 'Sanitizer has encountered a fatal error' "$out" &&
   ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: ' "$out"; then
    keep="$out.first"
    mv "$out" "$keep"
    echo "lsan-retry: the leak checker's tracer crashed at exit (no finding; first run's output: $keep): running again"
    "$@" >"$out" 2>&1
    rc=$?
fi
cat "$out"
rm -f "$out"
exit "$rc"
