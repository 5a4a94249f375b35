/*
 * yield.c -- random yields in debug builds (liburcu's DEBUG_YIELD).
 *
 * PP__YIELD(X) (checks.h) marks the points of the pin, unpin, release,
 * reclaim, eviction and load paths where another thread's step is most
 * likely to matter.  In a debug build, when class X is enabled, the thread
 * calls sched_yield() there with probability 1/one_in, so the torture
 * programs see interleavings that two cores rarely produce on their own.
 * Enabled by pp__debug_yield_set() (the torture's --yield) or by the
 * PINPOOL_YIELD environment variable, read once, at the first
 * pp_pool_create of the process.
 *
 * Compiled into the testing variant only (pinpool_testing, PP__TESTING=1,
 * checks.h): the product has no yield points.  In the variant's other
 * builds PP__YIELD compiles to nothing and these functions do nothing.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "testing/testhooks.h"   /* pp__debug_yield_set, defined here */

#define PP__YIELD_ONE_IN_DEFAULT 8u

#if PINPOOL_DEBUG

/* The classes enabled; read (relaxed) at every yield point. */
_Atomic unsigned pp__yield_mask;
static _Atomic unsigned yield_one_in = PP__YIELD_ONE_IN_DEFAULT;
/* pp__debug_yield_set was called: the environment no longer applies. */
static _Atomic int yield_explicit;
static pthread_once_t yield_env_once = PTHREAD_ONCE_INIT;
static __thread uint32_t yield_rng;

void pp__yield_maybe(void)
{
    unsigned one_in = pp__atomic_load_relaxed(&yield_one_in);
    if (one_in > 1) {
        uint32_t x = yield_rng;
        if (x == 0)   /* first use on this thread: a seed of its own, never 0 */
            x = (((uint32_t)gettid() * 0x9E3779B9u) ^ (uint32_t)(uintptr_t)&yield_rng) | 1u;
        x ^= x << 13;   /* xorshift32 */
        x ^= x >> 17;
        x ^= x << 5;
        yield_rng = x;
        if (x % one_in != 0)
            return;
    }
    sched_yield();
}

static void yield_store(unsigned mask, unsigned one_in)
{
    /* relaxed, both: switches, read independently; a yield point that sees
     * the new mask with the old rate (or the reverse) is harmless. */
    pp__atomic_store_relaxed(&yield_one_in, one_in == 0 ? 1u : one_in);
    pp__atomic_store_relaxed(&pp__yield_mask, mask & PP__YIELD_ALL);
}

void pp__debug_yield_set(unsigned mask, unsigned one_in)
{
    pp__atomic_store_relaxed(&yield_explicit, 1);
    yield_store(mask, one_in);
}

bool pp__debug_yield_available(void)
{
    return true;
}

static const struct {
    const char *name;
    unsigned bit;
} pp__yield_names[] = {
    {"all", PP__YIELD_ALL},         {"pin", PP__YIELD_PIN},
    {"unpin", PP__YIELD_UNPIN},     {"owner", PP__YIELD_OWNER},
    {"reclaim", PP__YIELD_RECLAIM}, {"evict", PP__YIELD_EVICT},
    {"load", PP__YIELD_LOAD},
};

/* "CLASSES[:ONE_IN]" (see internal.h); false if not understood. */
static bool yield_parse(const char *s, unsigned *mask, unsigned *one_in)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return false;
    strcpy(buf, s);
    *one_in = PP__YIELD_ONE_IN_DEFAULT;
    char *colon = strchr(buf, ':');
    if (colon != NULL) {
        *colon = '\0';
        char *end;
        unsigned long n = strtoul(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || n == 0 || n > 1000000000ul)
            return false;
        *one_in = (unsigned)n;
    }
    *mask = 0;
    if (buf[0] >= '0' && buf[0] <= '9') {
        char *end;
        unsigned long m = strtoul(buf, &end, 0);
        if (*end != '\0' || (m & ~(unsigned long)PP__YIELD_ALL) != 0)
            return false;
        *mask = (unsigned)m;
        return true;
    }
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",+", &save); tok != NULL; tok = strtok_r(NULL, ",+", &save)) {
        bool found = false;
        for (size_t i = 0; i < sizeof pp__yield_names / sizeof pp__yield_names[0]; i++) {
            if (strcmp(tok, pp__yield_names[i].name) == 0) {
                *mask |= pp__yield_names[i].bit;
                found = true;
            }
        }
        if (!found)
            return false;
    }
    return true;
}

static void yield_env_read(void)
{
    const char *env = getenv("PINPOOL_YIELD");
    if (env == NULL || env[0] == '\0' || pp__atomic_load_relaxed(&yield_explicit))
        return;
    unsigned mask, one_in;
    if (!yield_parse(env, &mask, &one_in)) {
        fprintf(stderr, "pinpool: PINPOOL_YIELD=%s not understood (want CLASSES[:ONE_IN], "
                "CLASSES: all, or pin,unpin,owner,reclaim,evict,load, or a mask); "
                "no yields\n", env);
        return;
    }
    yield_store(mask, one_in);
}

void pp__debug_yield_env(void)
{
    pthread_once(&yield_env_once, yield_env_read);
}

#else /* !PINPOOL_DEBUG */

void pp__debug_yield_set(unsigned mask, unsigned one_in)
{
    (void)mask;
    (void)one_in;
}

bool pp__debug_yield_available(void)
{
    return false;
}

void pp__debug_yield_env(void)
{
}

#endif
