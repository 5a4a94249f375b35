/*
 * report.c -- one line of report through the pool's report callback, or to
 * stderr without one.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/core.h"

/* Reports one line through the pool's report callback (or stderr). */
void pp__report(pp_pool_t *pool, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (pool != NULL && pool->report != NULL)
        pool->report(line, pool->report_ctx);
    else
        fprintf(stderr, "%s\n", line);
}

void pp_pool_report(pp_pool_t *pool, const char *line)
{
    if (line != NULL)
        pp__report(pool, "%s", line);
}
