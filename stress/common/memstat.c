/*
 * stress/common/memstat.c -- the process's memory from /proc/self/status
 * (memstat.h).
 */
#include "common/memstat.h"

#include <stdio.h>
#include <string.h>

uint64_t proc_status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return 0;
    char line[256];
    size_t n = strlen(field);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long kb;
        if (strncmp(line, field, n) == 0 && line[n] == ':' &&
            sscanf(line + n + 1, "%llu", &kb) == 1) {
            v = (uint64_t)kb * 1024u;   /* the kernel prints kB */
            break;
        }
    }
    fclose(f);
    return v;
}

const char *sanitizer_name(void)
{
#if defined(STRESS_ASAN)
    return "asan";
#elif defined(STRESS_TSAN)
    return "tsan";
#else
    return "none";
#endif
}
