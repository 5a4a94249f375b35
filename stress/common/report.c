/*
 * stress/common/report.c -- the pool's report callback (report.h).
 */
#include "common/report.h"
#include "common/fail.h"

#include <pthread.h>
#include <stdio.h>

_Atomic uint64_t g_report_lines;
char g_report_first[REPORT_KEEP_MAX][256];
atomic_int g_report_saved;

static int g_report_keep = REPORT_KEEP_MAX;

void report_keep(int n)
{
    g_report_keep = n < REPORT_KEEP_MAX ? n : REPORT_KEEP_MAX;
}

void report_cb(const char *line, void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_report_lines, 1);
    pthread_mutex_lock(&g_print_lock);
    int i = atomic_fetch_add(&g_report_saved, 1);
    if (i < g_report_keep)
        snprintf(g_report_first[i], sizeof g_report_first[i], "%s", line);
    pthread_mutex_unlock(&g_print_lock);
}
