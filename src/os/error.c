/*
 * error.c -- error names and messages (one X-macro list in pinpool.h), and
 * the abort for violated internal invariants.  Reports through a pool's
 * callback are core/report.c's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "os/os.h"

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

_Noreturn void pp__error_die(const char *file, int line, const char *what)
{
    fprintf(stderr, "pinpool: internal invariant violated at %s:%d: %s\n",
            file, line, what);
    fflush(stderr);
    abort();
}
