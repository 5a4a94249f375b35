/*
 * error.c -- error names and messages (one X-macro list in pinpool.h),
 * reports, and the abort for violated internal invariants.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

const char *pp_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define PP__ERR_MSG(name, value, msg) case PP_##name: return msg;
    PP_ERRNO_MAP(PP__ERR_MSG)
#undef PP__ERR_MSG
    default: return "unknown error";
    }
}

const char *pp_err_name(int err)
{
    switch (err) {
    case 0: return "PP_OK";
#define PP__ERR_NAME(name, value, msg) case PP_##name: return "PP_" #name;
    PP_ERRNO_MAP(PP__ERR_NAME)
#undef PP__ERR_NAME
    default: return "PP_E?";
    }
}

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

_Noreturn void pp__die(const char *file, int line, const char *what)
{
    fprintf(stderr, "pinpool: internal invariant violated at %s:%d: %s\n",
            file, line, what);
    fflush(stderr);
    abort();
}
