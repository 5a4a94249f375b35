/*
 * env.c -- options from the environment (docs/api.md, "Environment").
 *
 * pp_pool_create reads PINPOOL_MEMORY_LIMIT, PINPOOL_SWAP_DIR and
 * PINPOOL_SWAP_DIRECT for the options its caller left at their default,
 * and PINPOOL_TRACE, a file for the timeline trace (trace.c),
 * as mimalloc reads MIMALLOC_*: a program can be run out of core without
 * a rebuild.  What the caller set always wins.  A value that cannot be
 * read is an error of pp_pool_create (PP_EINVAL, and a report line that
 * names the variable), never ignored; an empty one is unset.  With PINPOOL_VERBOSE=1 each value
 * taken from the environment is reported once, when the pool is made.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* One report line before the pool exists: the caller's hook, or stderr. */
static void say(const pp_options_t *opt, const char *line)
{
    if (opt->report != NULL)
        opt->report(line, opt->report_ctx);
    else
        fprintf(stderr, "%s\n", line);
}

static int bad(const pp_options_t *opt, const char *var, const char *val, const char *want)
{
    char line[256];
    snprintf(line, sizeof line, "pinpool: %s=%s: %s; pool not created", var, val, want);
    say(opt, line);
    return PP_EINVAL;
}

/* A size: digits, then optionally K, M, G or T (powers of 1024, either
 * case, an optional B or iB after).  false if anything else, or if it
 * does not fit a size_t. */
static bool parse_size(const char *s, size_t *out)
{
    if (!isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return false;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    case '\0': break;
    default: return false;
    }
    if (shift != 0) {
        end++;
        if (toupper((unsigned char)end[0]) == 'I' && toupper((unsigned char)end[1]) == 'B')
            end += 2;
        else if (toupper((unsigned char)end[0]) == 'B')
            end++;
    }
    if (*end != '\0' || v > (unsigned long long)(SIZE_MAX >> shift))
        return false;
    *out = (size_t)v << shift;
    return true;
}

/* "1" or "0"; anything else is not a switch. */
static bool parse_switch(const char *s, bool *on)
{
    if (strcmp(s, "1") == 0 || strcmp(s, "0") == 0) {
        *on = s[0] == '1';
        return true;
    }
    return false;
}

/* The variable's value; NULL if it is unset or empty (VAR= unsets). */
static const char *env(const char *var)
{
    const char *v = getenv(var);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

int pp__env_options(const pp_options_t *opt, pp_options_t *eff, const char **trace)
{
    *eff = *opt;
    *trace = NULL;
    bool verbose = false;
    const char *v = env("PINPOOL_VERBOSE");
    if (v != NULL && !parse_switch(v, &verbose))
        return bad(opt, "PINPOOL_VERBOSE", v, "not 1 or 0");
    char line[256];

    v = env("PINPOOL_MEMORY_LIMIT");
    if (v != NULL && opt->mem_limit == 0) {
        if (!parse_size(v, &eff->mem_limit))
            return bad(opt, "PINPOOL_MEMORY_LIMIT", v,
                       "not a size (digits, then K, M, G or T for powers of 1024)");
        if (verbose) {
            snprintf(line, sizeof line, "pinpool: PINPOOL_MEMORY_LIMIT=%s: mem_limit %zu bytes",
                     v, eff->mem_limit);
            say(opt, line);
        }
    }
    v = env("PINPOOL_SWAP_DIR");
    if (v != NULL && opt->swap_dir == NULL) {
        if (eff->mem_limit == 0)
            return bad(opt, "PINPOOL_SWAP_DIR", v,
                       "swap needs a memory limit (PINPOOL_MEMORY_LIMIT or mem_limit)");
        eff->swap_dir = v;
        if (verbose) {
            snprintf(line, sizeof line, "pinpool: PINPOOL_SWAP_DIR=%s: swap there", v);
            say(opt, line);
        }
    }
    v = env("PINPOOL_SWAP_DIRECT");
    bool direct;
    if (v != NULL && !(opt->flags & PP_SWAP_DIRECT)) {
        if (!parse_switch(v, &direct))
            return bad(opt, "PINPOOL_SWAP_DIRECT", v, "not 1 or 0");
        if (direct)
            eff->flags |= PP_SWAP_DIRECT;
        if (verbose && eff->swap_dir != NULL) {   /* without swap: no files */
            snprintf(line, sizeof line, "pinpool: PINPOOL_SWAP_DIRECT=%s: swap files %s", v,
                     direct ? "opened O_DIRECT" : "through the page cache");
            say(opt, line);
        }
    }
    v = env("PINPOOL_TRACE");
    if (v != NULL) {
        *trace = v;
        if (verbose) {
            snprintf(line, sizeof line, "pinpool: PINPOOL_TRACE=%s: timeline trace written there",
                     v);
            say(opt, line);
        }
    }
    return 0;
}
