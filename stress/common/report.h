/*
 * stress/common/report.h -- the pool's report callback (pp_options_t.report)
 * of the stress programs: it counts the lines the pool reports and keeps
 * the first few, which the programs print or name in a failure (a pool
 * with nothing left must report nothing).
 */
#ifndef PP_STRESS_REPORT_H
#define PP_STRESS_REPORT_H

#include <stdatomic.h>
#include <stdint.h>

#define REPORT_KEEP_MAX 8

extern _Atomic uint64_t g_report_lines;             /* lines reported */
extern char g_report_first[REPORT_KEEP_MAX][256];   /* the first ones */
extern atomic_int g_report_saved;                   /* lines offered to g_report_first */

/* How many lines report_cb keeps (at most REPORT_KEEP_MAX; the default). */
void report_keep(int n);

void report_cb(const char *line, void *ctx);

#endif /* PP_STRESS_REPORT_H */
