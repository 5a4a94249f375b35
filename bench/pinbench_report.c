/*
 * pinbench_report.c -- what pinbench prints and writes: the table of each
 * scenario, the ratios the project tracks (each against its target), the
 * new / old ratios of a bench/sidebyside build, the CSV file and its check,
 * and the gnuplot picture.
 *
 * The CSV file starts with the machine (machine.h), one "# key: value"
 * line per field, so that the figures in it always name where they were
 * measured; the header and the rows follow.  A reader skips the lines that
 * start with '#' (gnuplot does by default; pandas: comment='#'; R:
 * comment.char='#').
 */
#define _GNU_SOURCE
#include "pinbench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PB_CSV_HEADER "scenario,impl,threads,ops,seconds,mops_per_s,ns_per_op_thread"
#define PB_CSV_COMMENT "# "

/* ------------------------------------------------------------------------ */
/* Table                                                                     */
/* ------------------------------------------------------------------------ */

void pb_print_table(const pb_results_t *r, unsigned s)
{
    int w = 14;                  /* "Mops/s (ns/op)", or the longest name */
    for (unsigned i = 0; i < r->nimpl; i++)
        if ((int)strlen(r->impl[i]) > w)
            w = (int)strlen(r->impl[i]);
    printf("\n%s: %s\n", r->scen[s], r->scen_what[s]);
    printf("  %-*s", w, "Mops/s (ns/op)");
    for (unsigned t = 0; t < r->nthreads; t++) {
        char head[32];
        snprintf(head, sizeof head, "%u thread%s", r->threads[t], r->threads[t] == 1 ? "" : "s");
        printf(" %19s", head);
    }
    printf("\n");
    for (unsigned i = 0; i < r->nimpl; i++) {
        int any = 0;
        for (unsigned t = 0; t < r->nthreads; t++)
            any |= pb_cell(r, s, i, t)->run;
        printf("  %-*s", w, r->impl[i]);
        for (unsigned t = 0; t < r->nthreads; t++) {
            const pb_result_t *c = pb_cell(r, s, i, t);
            if (c->run)
                printf(" %9.2f (%7.2f)", c->mops, c->ns_per_op);
            else
                printf(" %19s", "-");
        }
        printf("%s\n", any ? "" : "   (not run)");
    }
}

/* ------------------------------------------------------------------------ */
/* Ratios                                                                    */
/* ------------------------------------------------------------------------ */

enum { NS, MOPS };
enum { AT_MOST, AT_LEAST };

typedef struct pb_ratio {
    const char *scen;
    const char *a_impl;
    unsigned a_threads;
    const char *b_impl;
    unsigned b_threads;
    int metric;                 /* NS: ns per op per thread; MOPS: Mops/s */
    int sense;
    double target;
} pb_ratio_t;

/* The project's targets (docs/performance.md). */
static const pb_ratio_t ratios[] = {
    { "hot",         "pinpool",      1, "atomic-limit", 1, NS,   AT_MOST,  1.5 },
    { "hot",         "pinpool",      2, "atomic-limit", 2, MOPS, AT_LEAST, 0.8 },
    { "hot",         "pinpool",      2, "naive-array",  2, MOPS, AT_LEAST, 3.0 },
    { "hot",         "pinpool",      8, "pinpool",      2, MOPS, AT_LEAST, 0.8 },
    { "uniform",     "pinpool",      1, "naive-array",  1, NS,   AT_MOST,  2.0 },
    { "uniform-10k", "pinpool",      1, "naive-array",  1, NS,   AT_MOST,  1.3 },
    { "uniform-10m", "pinpool",      1, "naive-array",  1, NS,   AT_MOST,  2.0 },
    { "uniform",     "pinpool",      2, "mutex-dict",   2, MOPS, AT_LEAST, 20.0 },
    { "uniform",     "pinpool",      2, "urcu-lfht",    2, MOPS, AT_LEAST, 4.0 },
    { "task",        "pinpool",      2, "naive-array",  2, MOPS, AT_LEAST, 0.67 },
    { "task",        "pinpool-qsbr", 2, "pinpool",      2, MOPS, AT_LEAST, 1.0 },
    { "task",        "pinpool",      2, "urcu-lfht",    2, MOPS, AT_LEAST, 1.5 },
    { "churn",       "pinpool",      2, "mutex-dict",   2, MOPS, AT_LEAST, 2.0 },
    /* A pin at the floor: through the shared library within 1.6x of the
     * floor of any validated pin, inlined within 1.3x; one entry pinned by
     * 2 threads at 0.9 of twice one thread's atomic add and sub. */
    { "hot",         "pinpool",        1, "cas-floor",    1, NS,   AT_MOST,  1.6 },
    { "hot",         "pinpool",        2, "cas-floor",    2, NS,   AT_MOST,  1.6 },
    { "uniform",     "pinpool",        1, "cas-floor",    1, NS,   AT_MOST,  1.6 },
    { "uniform",     "pinpool",        2, "cas-floor",    2, NS,   AT_MOST,  1.6 },
    { "task",        "pinpool",        1, "cas-floor",    1, NS,   AT_MOST,  1.6 },
    { "task",        "pinpool",        2, "cas-floor",    2, NS,   AT_MOST,  1.6 },
    { "hot",         "pinpool-inline", 1, "cas-floor",    1, NS,   AT_MOST,  1.3 },
    { "hot",         "pinpool-inline", 2, "cas-floor",    2, NS,   AT_MOST,  1.3 },
    { "uniform",     "pinpool-inline", 1, "cas-floor",    1, NS,   AT_MOST,  1.3 },
    { "uniform",     "pinpool-inline", 2, "cas-floor",    2, NS,   AT_MOST,  1.3 },
    { "task",        "pinpool-inline", 1, "cas-floor",    1, NS,   AT_MOST,  1.3 },
    { "task",        "pinpool-inline", 2, "cas-floor",    2, NS,   AT_MOST,  1.3 },
    { "hot",         "pinpool-inline", 2, "atomic-limit", 1, MOPS, AT_LEAST, 1.8 },
};

static const pb_result_t *find(const pb_results_t *r, const char *scen, const char *impl,
                               unsigned threads)
{
    for (unsigned s = 0; s < r->nscen; s++) {
        if (strcmp(r->scen[s], scen) != 0)
            continue;
        for (unsigned i = 0; i < r->nimpl; i++) {
            if (strcmp(r->impl[i], impl) != 0)
                continue;
            for (unsigned t = 0; t < r->nthreads; t++)
                if (r->threads[t] == threads && pb_cell(r, s, i, t)->run)
                    return pb_cell(r, s, i, t);
        }
    }
    return NULL;
}

static const char *threads_word(unsigned n)
{
    return n == 1 ? "thread" : "threads";
}

/*
 * A pin's cost split in two at cas-floor, the floor of any validated pin
 * with a data pointer (pinbench_floor.c): cas-floor / naive-array is what
 * validating a ref and going through its record to the data cost in
 * themselves, which no validated pin avoids; pinpool / cas-floor is what
 * pinpool adds above that.  Informational, no targets.  Both are ratios of
 * time per op, "x slower": of ns per op in the 1-thread cells, of the
 * inverse of Mops/s in the 2-thread one (the same thing at equal threads).
 */
static const struct {
    const char *scen;
    unsigned threads;
    int metric;
} splits[] = {
    { "hot", 1, NS }, { "uniform", 1, NS }, { "uniform-10m", 1, NS }, { "task", 2, MOPS },
};

static void print_split(const pb_results_t *r)
{
    static const char *const pair[2][2] = { { "cas-floor", "naive-array" },
                                            { "pinpool", "cas-floor" } };
    static const char *const why[2] = { "validation + data pointer: any validated pin's",
                                        "pinpool's own overhead" };
    int printed = 0;
    for (size_t k = 0; k < sizeof splits / sizeof splits[0]; k++) {
        for (unsigned j = 0; j < 2; j++) {
            const pb_result_t *a = find(r, splits[k].scen, pair[j][0], splits[k].threads);
            const pb_result_t *b = find(r, splits[k].scen, pair[j][1], splits[k].threads);
            if (a == NULL || b == NULL)
                continue;                /* its cells were not run */
            if (!printed++)
                printf("\nwhat a pin costs, split (this run; informational, no targets):\n");
            double v = splits[k].metric == NS ? a->ns_per_op / b->ns_per_op : b->mops / a->mops;
            char label[160];
            snprintf(label, sizeof label, "%s %u %s: %s / %s, %s", splits[k].scen,
                     splits[k].threads, threads_word(splits[k].threads), pair[j][0],
                     pair[j][1], splits[k].metric == NS ? "ns per op" : "inverse Mops/s");
            /* "slower" whatever the value, so that every line reads the
             * same way; one below 1 says so. */
            printf("  %-58s = %6.2fx slower%s  (%s)\n", label, v, v < 1 ? " (< 1: faster)" : "",
                   why[j]);
        }
    }
}

/* What a scope costs a task: pinpool-scope's task (pp_scope_pin_many +
 * pp_scope_end) against pinpool's (pp_pin_many + pp_unpin_many), as time
 * per task, "x slower"; informational. */
static void print_scope_cost(const pb_results_t *r)
{
    int printed = 0;
    for (unsigned t = 0; t < r->nthreads; t++) {
        const pb_result_t *a = find(r, "task", "pinpool-scope", r->threads[t]);
        const pb_result_t *b = find(r, "task", "pinpool", r->threads[t]);
        if (a == NULL || b == NULL)
            continue;
        if (!printed++)
            printf("\nwhat a scope costs a task (this run; informational, no targets):\n");
        char label[160];
        snprintf(label, sizeof label, "task %u %s: pinpool-scope / pinpool, inverse Mops/s",
                 r->threads[t], threads_word(r->threads[t]));
        double v = b->mops / a->mops;
        printf("  %-58s = %6.2fx slower%s\n", label, v, v < 1 ? " (< 1: faster)" : "");
    }
}

void pb_print_ratios(const pb_results_t *r)
{
    int printed = 0;
    for (size_t k = 0; k < sizeof ratios / sizeof ratios[0]; k++) {
        const pb_ratio_t *q = &ratios[k];
        const pb_result_t *a = find(r, q->scen, q->a_impl, q->a_threads);
        const pb_result_t *b = find(r, q->scen, q->b_impl, q->b_threads);
        if (a == NULL || b == NULL)
            continue;                    /* its cells were not run */
        if (!printed++)
            printf("\nratios (medians of this run) against the project's targets:\n");
        double v = q->metric == NS ? a->ns_per_op / b->ns_per_op : a->mops / b->mops;
        int met = q->sense == AT_MOST ? v <= q->target : v >= q->target;
        char label[160];
        if (strcmp(q->a_impl, q->b_impl) == 0)
            snprintf(label, sizeof label, "%s: %s %u %s / %u %s, %s", q->scen, q->a_impl,
                     q->a_threads, threads_word(q->a_threads), q->b_threads,
                     threads_word(q->b_threads), q->metric == NS ? "ns per op" : "Mops/s");
        else
            snprintf(label, sizeof label, "%s %u %s: %s / %s, %s", q->scen, q->a_threads,
                     threads_word(q->a_threads), q->a_impl, q->b_impl,
                     q->metric == NS ? "ns per op" : "Mops/s");
        printf("  %-58s = %6.2f  (target %s %.4g: %s)\n", label, v,
               q->sense == AT_MOST ? "<=" : ">=", q->target, met ? "met" : "NOT met");
    }
    print_split(r);
    print_scope_cost(r);
}

/* ------------------------------------------------------------------------ */
/* New / old (bench/sidebyside)                                              */
/* ------------------------------------------------------------------------ */

#define PB_OLD_SUFFIX "-old"
#define PB_OLD_BAND_LO 0.9
#define PB_OLD_BAND_HI 1.1

/* The index of the implementation named name, or nimpl. */
static unsigned impl_index(const pb_results_t *r, const char *name, size_t len)
{
    for (unsigned i = 0; i < r->nimpl; i++)
        if (strlen(r->impl[i]) == len && strncmp(r->impl[i], name, len) == 0)
            return i;
    return r->nimpl;
}

void pb_print_old_ratios(const pb_results_t *r)
{
    size_t sl = strlen(PB_OLD_SUFFIX);
    for (unsigned io = 0; io < r->nimpl; io++) {
        size_t len = strlen(r->impl[io]);
        if (len <= sl || strcmp(r->impl[io] + len - sl, PB_OLD_SUFFIX) != 0)
            continue;
        unsigned in = impl_index(r, r->impl[io], len - sl);   /* X of X-old */
        if (in == r->nimpl)
            continue;
        unsigned cells = 0, outside = 0;
        double logsum = 0;
        for (unsigned s = 0; s < r->nscen; s++)
            for (unsigned t = 0; t < r->nthreads; t++)
                cells += pb_cell(r, s, in, t)->run && pb_cell(r, s, io, t)->run;
        if (cells == 0)
            continue;                    /* not both run */
        printf("\nnew / old: %s / %s, Mops/s of the median rounds (same run, interleaved):\n",
               r->impl[in], r->impl[io]);
        printf("  %-14s", "scenario");
        for (unsigned t = 0; t < r->nthreads; t++) {
            char head[32];
            snprintf(head, sizeof head, "%u thread%s", r->threads[t],
                     r->threads[t] == 1 ? "" : "s");
            printf(" %10s", head);
        }
        printf("\n");
        for (unsigned s = 0; s < r->nscen; s++) {
            int any = 0;
            for (unsigned t = 0; t < r->nthreads; t++)
                any |= pb_cell(r, s, in, t)->run && pb_cell(r, s, io, t)->run;
            if (!any)
                continue;
            printf("  %-14s", r->scen[s]);
            for (unsigned t = 0; t < r->nthreads; t++) {
                const pb_result_t *a = pb_cell(r, s, in, t), *b = pb_cell(r, s, io, t);
                if (!a->run || !b->run) {
                    printf(" %10s", "-");
                    continue;
                }
                double v = a->mops / b->mops;
                int out = v < PB_OLD_BAND_LO || v > PB_OLD_BAND_HI;
                logsum += log(v);
                outside += out;
                printf(" %9.3f%s", v, out ? "*" : " ");
            }
            printf("\n");
        }
        printf("  geometric mean of the %u cell%s: %.3f; cells outside %.1f-%.1f (marked *): %u\n",
               cells, cells == 1 ? "" : "s", exp(logsum / cells), PB_OLD_BAND_LO,
               PB_OLD_BAND_HI, outside);
    }
}

/* ------------------------------------------------------------------------ */
/* CSV                                                                       */
/* ------------------------------------------------------------------------ */

void pb_write_csv(const pb_results_t *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        pb_die("cannot create %s: %s", path, strerror(errno));
    int bad = machine_print(f, r->machine, PB_CSV_COMMENT) != 0;
    bad |= fprintf(f, "%s\n", PB_CSV_HEADER) < 0;
    for (unsigned s = 0; s < r->nscen; s++)
        for (unsigned i = 0; i < r->nimpl; i++)
            for (unsigned t = 0; t < r->nthreads; t++) {
                const pb_result_t *c = pb_cell(r, s, i, t);
                if (c->run)
                    bad |= fprintf(f, "%s,%s,%u,%llu,%.6f,%.4f,%.4f\n", r->scen[s],
                                   r->impl[i], r->threads[t], (unsigned long long)c->ops,
                                   c->seconds, c->mops, c->ns_per_op) < 0;
            }
    if (fclose(f) != 0 || bad)
        pb_die("cannot write %s: %s", path, strerror(errno));
    printf("\npinbench: wrote %s\n", path);
}

/* A positive finite number that is the whole field. */
static int positive(const char *field, int integer)
{
    char *end;
    errno = 0;
    double v = integer ? (double)strtoull(field, &end, 10) : strtod(field, &end);
    return field[0] != '\0' && field[0] != '-' && *end == '\0' && errno == 0 &&
           isfinite(v) && v > 0;
}

void pb_check_csv(const pb_results_t *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        pb_die("--check-csv: cannot open %s: %s", path, strerror(errno));
    unsigned *rows = pb_calloc(r->nscen + 1, sizeof *rows);
    char line[1024], cpu_key[64];
    snprintf(cpu_key, sizeof cpu_key, "%s%s: ", PB_CSV_COMMENT, machine_key(MACHINE_CPU));
    unsigned lineno = 0, comments = 0, nrows = 0;
    int header = 0, cpu = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        size_t len = strlen(line);
        if (len == 0 || line[len - 1] != '\n')
            pb_die("--check-csv: %s:%u: line too long or not terminated", path, lineno);
        line[len - 1] = '\0';
        /* The machine first, then the header: pinbench writes no comment
         * after it. */
        if (!header && line[0] == '#') {
            if (strncmp(line, PB_CSV_COMMENT, strlen(PB_CSV_COMMENT)) != 0)
                pb_die("--check-csv: %s:%u: a comment line that does not start with \"%s\"",
                       path, lineno, PB_CSV_COMMENT);
            cpu |= strncmp(line, cpu_key, strlen(cpu_key)) == 0;
            comments++;
            continue;
        }
        if (!header) {
            if (!cpu)
                pb_die("--check-csv: %s: no \"%s\" line before the header (the machine)", path,
                       cpu_key);
            if (strcmp(line, PB_CSV_HEADER) != 0)
                pb_die("--check-csv: %s:%u: header is \"%s\", expected \"%s\"", path, lineno,
                       line, PB_CSV_HEADER);
            header = 1;
            continue;
        }
        if (line[0] == '#')
            pb_die("--check-csv: %s:%u: a comment line after the header", path, lineno);
        char *field[8], *save = NULL;
        unsigned nf = 0;
        for (char *p = strtok_r(line, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save))
            if (nf < 8)
                field[nf++] = p;
        if (nf != 7)
            pb_die("--check-csv: %s:%u: %u fields, expected 7", path, lineno, nf);
        int known = 0;
        for (unsigned i = 0; i < r->nimpl; i++)
            known |= strcmp(field[1], r->impl[i]) == 0;
        if (!known)
            pb_die("--check-csv: %s:%u: unknown implementation \"%s\"", path, lineno, field[1]);
        for (unsigned k = 2; k < 7; k++)
            if (!positive(field[k], k <= 3))
                pb_die("--check-csv: %s:%u: field %u (\"%s\") is not a positive number",
                       path, lineno, k + 1, field[k]);
        unsigned s = 0;
        while (s < r->nscen && strcmp(field[0], r->scen[s]) != 0)
            s++;
        if (s == r->nscen)
            pb_die("--check-csv: %s:%u: unknown scenario \"%s\"", path, lineno, field[0]);
        rows[s]++;
        nrows++;
    }
    if (ferror(f) || fclose(f) != 0)
        pb_die("--check-csv: cannot read %s", path);
    if (lineno == 0)
        pb_die("--check-csv: %s is empty", path);
    if (!header)
        pb_die("--check-csv: %s has no header line", path);
    for (unsigned s = 0; s < r->nscen; s++)
        if (rows[s] == 0)
            pb_die("--check-csv: %s has no row for scenario %s", path, r->scen[s]);
    printf("pinbench: --check-csv: %s is well formed (%u machine lines, %u rows,"
           " every scenario present)\n", path, comments, nrows);
    free(rows);
}

/* ------------------------------------------------------------------------ */
/* Plot                                                                      */
/* ------------------------------------------------------------------------ */

int pb_gnuplot_found(void)
{
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0')
        return 0;
    char *dirs = strdup(path);
    if (dirs == NULL)
        pb_die("out of memory");
    int found = 0;
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL && !found;
         d = strtok_r(NULL, ":", &save)) {
        char exe[4096];
        if (snprintf(exe, sizeof exe, "%s/gnuplot", d) < (int)sizeof exe)
            found = access(exe, X_OK) == 0;
    }
    free(dirs);
    return found;
}

/* Throughput against threads, one panel per scenario, one line per
 * implementation; the data go inline as gnuplot datablocks. */
void pb_plot(const pb_results_t *r, const char *path)
{
    /* One per implementation in impls[] order (pinbench.c): eight in a
     * default build, ten in a bench/sidebyside one. */
    static const char *const colors[] = { "#7b2cbf", "#2a9d8f", "#8d99ae",
                                           "#e76f51", "#e9c46a", "#d62828",
                                           "#1d4ed8", "#f4a261", "#111111",
                                           "#6b705c" };
    if (strpbrk(path, "'\"\n\\") != NULL)
        pb_die("--plot: the file name may not contain quotes, backslashes or newlines");
    if (!pb_gnuplot_found())
        pb_die("--plot needs gnuplot, which is not on PATH (Debian: apt-get install gnuplot-nox)");
    FILE *g = popen("gnuplot", "w");
    if (g == NULL)
        pb_die("cannot run gnuplot: %s", strerror(errno));
    unsigned cols = r->nscen < 3 ? r->nscen : 3, rows = (r->nscen + cols - 1) / cols;
    unsigned maxthr = 1;
    for (unsigned t = 0; t < r->nthreads; t++)
        if (r->threads[t] > maxthr)
            maxthr = r->threads[t];

    for (unsigned s = 0; s < r->nscen; s++)
        for (unsigned i = 0; i < r->nimpl; i++) {
            fprintf(g, "$d%u_%u << EOD\n", s, i);
            for (unsigned t = 0; t < r->nthreads; t++) {
                const pb_result_t *c = pb_cell(r, s, i, t);
                if (c->run)
                    fprintf(g, "%u %.6g\n", r->threads[t], c->mops);
            }
            fprintf(g, "EOD\n");
        }
    /* pngcairo draws better; plain png (libgd) is the fallback. */
    fprintf(g,
            "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "  set terminal pngcairo size %u,%u font ',10'\n"
            "} else {\n"
            "  set terminal png size %u,%u\n"
            "}\n"
            "set output '%s'\n"
            "set multiplot layout %u,%u title 'pinbench: throughput (Mops/s, all threads,"
            " median round) against threads'\n"
            "set logscale xy 2\n"
            "set xrange [0.8:%g]\n"
            "set xtics (",
            cols * 600, rows * 380 + 40, cols * 600, rows * 380 + 40, path, rows, cols,
            maxthr * 1.25);
    for (unsigned t = 0; t < r->nthreads; t++)
        fprintf(g, "%s'%u' %u", t ? ", " : "", r->threads[t], r->threads[t]);
    fprintf(g, ")\nset format y '%%g'\nset grid\n"
               "set key outside right top vertical font ',8' samplen 2\n"
               "set xlabel 'threads'\nset ylabel 'Mops/s'\n");
    for (unsigned s = 0; s < r->nscen; s++) {
        fprintf(g, "set title '%s'\nplot ", r->scen[s]);
        int first = 1;
        for (unsigned i = 0; i < r->nimpl; i++) {
            int any = 0;
            for (unsigned t = 0; t < r->nthreads; t++)
                any |= pb_cell(r, s, i, t)->run;
            if (!any)
                continue;
            fprintf(g, "%s$d%u_%u using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb '%s'"
                    " title '%s'", first ? "" : ", ", s, i,
                    colors[i % (sizeof colors / sizeof colors[0])], r->impl[i]);
            first = 0;
        }
        if (first)
            fprintf(g, "NaN notitle");
        fprintf(g, "\n");
    }
    fprintf(g, "unset multiplot\nset output\n");
    int st = pclose(g);
    if (st != 0)
        pb_die("gnuplot failed (status %d) drawing %s", st, path);
    printf("pinbench: wrote %s\n", path);
}
