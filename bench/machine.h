/*
 * machine.h -- where a benchmark ran, so that every figure it gives can
 * name its machine (pinbench and swapbench print this at the top of their
 * output and write it at the top of their CSV files).
 *
 * The figures of this project are ratios measured within one run, but they
 * still move with the CPU (a pin costs 2.46x a bare atomic on one CPU the
 * project's VM was given and 1.28x on another), its caches, the cores the
 * process had and the kernel's transparent huge page mode; a figure without
 * them cannot be compared with the next one.
 *
 * Every field is text, and a field that cannot be read is "unknown": a
 * description never fails and never stops a run.
 */
#ifndef BENCH_MACHINE_H
#define BENCH_MACHINE_H

#include <stdio.h>

enum {
    MACHINE_CPU,          /* model name, e.g. "AMD EPYC" */
    MACHINE_CPU_ID,       /* "family 25, model 1, stepping 1" (x86 numbers) */
    MACHINE_CACHES,       /* "L1d 32 KiB x 2, L2 512 KiB x 2, L3 32 MiB x 1" */
    MACHINE_CPUS,         /* "2 cores, 2 PUs for this process (of 2 cores, 2 PUs)" */
    MACHINE_NUMA,         /* NUMA nodes */
    MACHINE_HYPERVISOR,   /* "yes", "no": the CPU's hypervisor flag */
    MACHINE_KERNEL,       /* uname: release and machine */
    MACHINE_THP,          /* transparent huge pages: always, madvise or never */
    MACHINE_DATE,         /* when it was described (the run's start), UTC, ISO 8601 */
    MACHINE_COMMIT,       /* pinpool's commit when the build was configured */
    MACHINE_NFIELDS
};

#define MACHINE_VALUE_MAX 192

typedef struct machine {
    char value[MACHINE_NFIELDS][MACHINE_VALUE_MAX];
} machine_t;

/* The key of a field, as printed: "cpu", "cpu_id", "caches" ... */
const char *machine_key(int field);

/* Fills in m from /proc/cpuinfo, hwloc, sched_getaffinity, uname, sysfs,
 * the clock and the build. */
void machine_describe(machine_t *m);

/* Writes one line "<prefix><key>: <value>" per field to f, in the order
 * above ("machine: " on a program's output, "# " in a CSV file).  Returns
 * 0, or -1 if a write failed. */
int machine_print(FILE *f, const machine_t *m, const char *prefix);

#endif /* BENCH_MACHINE_H */
