#!/bin/sh
# in_swapdir.sh PARENT COMMAND [ARG...]
#
# Runs COMMAND ARG... --swap DIR with DIR a new directory under PARENT, and
# removes DIR afterwards whatever happened: a torture run that fails leaves
# its swap files in place for a human to look at, which a seeded run (meant
# to fail) must not do at every run.  Exits with COMMAND's status.
set -u
parent=$1
shift
dir=$(mktemp -d "$parent/seeded-XXXXXX") || exit 2
"$@" --swap "$dir"
rc=$?
rm -rf "$dir"
exit $rc
