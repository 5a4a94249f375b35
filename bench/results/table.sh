#!/bin/sh
# bench/results/table.sh -- a benchmark's CSV file as the markdown table of
# docs/performance.md.
#
#   bench/results/table.sh pinbench FILE.csv
#   bench/results/table.sh swapbench FILE.csv
#
# pinbench: the ratios against the project's targets, read from the table
# ratios[] of bench/pinbench_report.c, as pinbench prints them.
# swapbench: the median MB/s of each phase and implementation over the
# rounds, and the pool's ratios to raw io_uring, to pwrite or pread and to
# the thread engine, for each I/O mode the run holds.
# The first line says where the run was: the CSV's "# cpu", "# cpu_id",
# "# date" and "# commit" lines.  POSIX sh and awk only.
set -eu
usage() {
    echo "usage: $0 pinbench|swapbench FILE.csv" >&2
    exit 2
}
[ $# -eq 2 ] || usage
kind=$1
csv=$2
case $kind in pinbench|swapbench) ;; *) usage ;; esac
[ -r "$csv" ] || { echo "$0: cannot read $csv" >&2; exit 1; }
top=$(cd "$(dirname "$0")/../.." && pwd)

# Where the run was, from the comment lines at the top of the file.
awk '
/^# cpu: /    { sub(/^# cpu: /, "");    cpu = $0 }
/^# cpu_id: / { sub(/^# cpu_id: /, ""); id = $0 }
/^# date: /   { sub(/^# date: /, "");   date = $0 }
/^# commit: / { sub(/^# commit: /, ""); commit = $0 }
END {
    if (cpu == "") cpu = "CPU model not recorded"
    printf "%s", cpu
    if (id != "") printf " (%s)", id
    if (date != "") printf ", %s", date
    if (commit != "") printf ", commit %s", commit
    printf "\n\n"
}' "$csv"

case $kind in
pinbench)
    awk -F, '
    # The targets: the lines of ratios[] in pinbench_report.c, such as
    #   { "hot", "pinpool", 1, "atomic-limit", 1, NS, AT_MOST, 1.5 },
    FNR == NR {
        if ($0 ~ /ratios\[\] = \{/) { on = 1; next }
        if (on && $0 ~ /^\};/) { on = 0; next }
        if (!on || $0 !~ /^ *\{ *"/) next
        line = $0
        gsub(/[{}" ]/, "", line)
        split(line, f, ",")
        n++
        scen[n] = f[1]; ai[n] = f[2]; at[n] = f[3]; bi[n] = f[4]; bt[n] = f[5]
        metric[n] = f[6]; sense[n] = f[7]; target[n] = f[8]
        next
    }
    /^#/ || $1 == "scenario" { next }
    { mops[$1 "," $2 "," $3] = $6; ns[$1 "," $2 "," $3] = $7 }
    END {
        if (n == 0) { print "table.sh: no targets found in pinbench_report.c" > "/dev/stderr"; exit 1 }
        print "| ratio (medians of the run) | figure | target |"
        print "|---|---|---|"
        for (k = 1; k <= n; k++) {
            a = scen[k] "," ai[k] "," at[k]; b = scen[k] "," bi[k] "," bt[k]
            if (!(a in mops) || !(b in mops)) continue
            v = metric[k] == "NS" ? ns[a] / ns[b] : mops[a] / mops[b]
            met = sense[k] == "AT_MOST" ? v <= target[k] + 0 : v >= target[k] + 0
            unit = metric[k] == "NS" ? "ns per op" : "Mops/s"
            tw = at[k] == 1 ? "thread" : "threads"
            if (ai[k] == bi[k])
                label = sprintf("%s: %s %s / %s threads, %s", scen[k], ai[k], at[k], bt[k], unit)
            else
                label = sprintf("%s %s %s: %s / %s, %s", scen[k], at[k], tw, ai[k], bi[k], unit)
            printf "| %s | %.2f | %s %s: %s |\n", label, v,
                sense[k] == "AT_MOST" ? "<=" : ">=", target[k], met ? "met" : "**not met**"
        }
    }' "$top/bench/pinbench_report.c" "$csv"
    ;;
swapbench)
    awk -F, '
    /^#/ || $1 == "phase" { next }
    {
        k = $1 "," $2
        if (!(k in cnt)) { cnt[k] = 0 }
        v[k, ++cnt[k]] = $6 + 0
    }
    function median(k,    i, j, t, m, a) {
        m = cnt[k]
        for (i = 1; i <= m; i++) a[i] = v[k, i]
        for (i = 2; i <= m; i++)
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    function row(phase, mode, pool, thr, base, ring,    p, t, b, r) {
        if (!((phase "," pool) in cnt)) return
        p = median(phase "," pool); t = median(phase "," thr)
        b = median(phase "," base); r = median(phase "," ring)
        printf "| %s, %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx |\n",
            phase, mode, p, t, b, r, p / r, p / b, p / t
    }
    END {
        print "| median MB/s | pool, io_uring | thread engine | pwrite/pread | raw io_uring | to raw io_uring | to pwrite/pread | to thread engine |"
        print "|---|---|---|---|---|---|---|---|"
        row("swap-out", "buffered", "pinpool", "pinpool-threads", "pwrite", "io_uring")
        row("swap-in", "buffered", "pinpool", "pinpool-threads", "pread", "io_uring")
        row("swap-out", "direct", "pinpool-direct", "pinpool-thr-direct", "pwrite-direct", "io_uring-direct")
        row("swap-in", "direct", "pinpool-direct", "pinpool-thr-direct", "pread-direct", "io_uring-direct")
    }' "$csv"
    ;;
*)
    usage
    ;;
esac
