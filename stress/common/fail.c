/*
 * stress/common/fail.c -- failure reporting of the stress programs
 * (fail.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/fail.h"
#include "common/cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

atomic_int g_failed;
atomic_int g_fail_msgs;
pthread_mutex_t g_print_lock = PTHREAD_MUTEX_INITIALIZER;

#define FAIL_MSG_MAX 1200

static atomic_int *g_fail_stop;
static size_t g_fail_msg_size = FAIL_MSG_MAX;
static const char *g_fail_pool_who = "pool tid";

void fail_setup(atomic_int *stop, size_t msg_size, const char *pool_who)
{
    g_fail_stop = stop;
    g_fail_msg_size = msg_size < FAIL_MSG_MAX ? msg_size : FAIL_MSG_MAX;
    g_fail_pool_who = pool_who;
}

void fail_vat(const char *who, const char *fmt, va_list ap)
{
    atomic_store(&g_failed, 1);
    if (g_fail_stop != NULL)
        atomic_store(g_fail_stop, 1);
    if (atomic_fetch_add(&g_fail_msgs, 1) >= MAX_FAIL_MSGS)
        return;
    char msg[FAIL_MSG_MAX];
    vsnprintf(msg, g_fail_msg_size, fmt, ap);
    char pool[64];
    if (who == NULL) {
        snprintf(pool, sizeof pool, "%s %ld", g_fail_pool_who, (long)syscall(SYS_gettid));
        who = pool;
    }
    pthread_mutex_lock(&g_print_lock);
    printf("%s: FAIL: %s [seed=%" PRIu64 " thread=%s]\n", stress_prog, msg, g_seed, who);
    fflush(stdout);
    pthread_mutex_unlock(&g_print_lock);
}

void fail_at(const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_vat(who, fmt, ap);
    va_end(ap);
}

void oom(void)
{
    fprintf(stderr, "%s: out of memory\n", stress_prog);
    exit(2);
}
