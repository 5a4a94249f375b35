/*
 * stress/common/cli.c -- command-line helpers of the stress programs
 * (cli.h).
 */
#include "common/cli.h"
#include "common/content.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t g_seed;

uint64_t seed_from_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)getpid() << 32);
    return splitmix64(&x) % 1000000000u;
}

uint64_t parse_u64(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, "%s: bad value for %s: '%s'\n", stress_prog, opt, s);
        exit(2);
    }
    return (uint64_t)v;
}

uint64_t parse_size_part(const char *opt, const char *s, const char **endp)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') {
        fprintf(stderr, "%s: bad size for %s: '%s'\n", stress_prog, opt, s);
        exit(2);
    }
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift && *end == 'i')
        end++;
    if (shift && (*end == 'b' || *end == 'B'))
        end++;
    if (v > (UINT64_MAX >> shift)) {
        fprintf(stderr, "%s: size too large for %s: '%s'\n", stress_prog, opt, s);
        exit(2);
    }
    *endp = end;
    return (uint64_t)v << shift;
}

uint64_t parse_size(const char *opt, const char *s)
{
    const char *end;
    uint64_t v = parse_size_part(opt, s, &end);
    if (*end) {
        fprintf(stderr, "%s: bad size for %s: '%s'\n", stress_prog, opt, s);
        exit(2);
    }
    return v;
}

size_t parse_backlog(const char *opt, const char *s)
{
    if (!strcmp(s, "none"))
        return SIZE_MAX;
    uint64_t v = parse_size(opt, s);
    if (v >= SIZE_MAX) {
        fprintf(stderr, "%s: size too large for %s: '%s' (use none for no bound)\n",
                stress_prog, opt, s);
        exit(2);
    }
    return (size_t)v;
}

const char *backlog_str(uint64_t bound, char *buf, size_t size)
{
    if (bound == UINT64_MAX || bound == SIZE_MAX)
        snprintf(buf, size, "none");
    else
        snprintf(buf, size, "%" PRIu64, bound);
    return buf;
}

double parse_secs(const char *opt, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0 && v < 1e7)) {
        fprintf(stderr, "%s: bad value for %s: '%s'\n", stress_prog, opt, s);
        exit(2);
    }
    return v;
}

void stress_opt_split(const char **a, const char **v, char *name, size_t size)
{
    const char *eq = strchr(*a, '=');
    if (strncmp(*a, "--", 2) == 0 && eq != NULL && (size_t)(eq - *a) < size) {
        memcpy(name, *a, (size_t)(eq - *a));
        name[eq - *a] = '\0';
        *v = eq + 1;
        *a = name;
    }
}
