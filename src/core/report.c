/*
 * report.c -- one line of report through the pool's report callback, or to
 * stderr without one.
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/core.h"

__attribute__((format(printf, 3, 0))) static void
report_line(void (*hook)(const char *, void *), void *ctx, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    if (hook != NULL)
        hook(line, ctx);
    else
        fprintf(stderr, "%s\n", line);
}

/* Reports one line through the pool's report callback (or stderr). */
void pp__report(pp_pool_t *pool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_line(pool != NULL ? pool->report : NULL, pool != NULL ? pool->report_ctx : NULL, fmt,
                ap);
    va_end(ap);
}

void pp__report_opt(const pp_options_t *opt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_line(opt != NULL ? opt->report : NULL, opt != NULL ? opt->report_ctx : NULL, fmt, ap);
    va_end(ap);
}

void pp_pool_report(pp_pool_t *pool, const char *line)
{
    if (line != NULL)
        pp__report(pool, "%s", line);
}
