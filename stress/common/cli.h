/*
 * stress/common/cli.h -- the command line of the stress programs: the
 * program's name (for messages), the seed, "--name value" and
 * "--name=value" options, and parsers of numbers, sizes and seconds that
 * exit 2 with a message naming the option.
 */
#ifndef PP_STRESS_CLI_H
#define PP_STRESS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The program's name, first word of every line it prints ("torture");
 * each program's main.c defines it. */
extern const char stress_prog[];

/* The run's seed (--seed, or seed_from_clock()): printed in every FAIL line. */
extern uint64_t g_seed;

/* A seed for a run without --seed: from the clock and the pid, below 10^9. */
uint64_t seed_from_clock(void);

/* An unsigned number (decimal, 0x hex or 0 octal) for option opt. */
uint64_t parse_u64(const char *opt, const char *s);

/* A byte count with an optional binary suffix K, M or G (KiB, MB...);
 * *endp past it. */
uint64_t parse_size_part(const char *opt, const char *s, const char **endp);

/* A byte count and nothing after it. */
uint64_t parse_size(const char *opt, const char *s);

/* --reclaim-backlog: a byte count as parse_size, or "none", which gives
 * SIZE_MAX (PP_RECLAIM_BACKLOG_NONE: no bound).  0 is the pool's default. */
size_t parse_backlog(const char *opt, const char *s);

/* The bound a pool was given: "none", or the bytes ("67108864"). */
const char *backlog_str(uint64_t bound, char *buf, size_t size);

/* Seconds, more than 0 and less than 10^7 (fractions allowed). */
double parse_secs(const char *opt, const char *s);

/* "--name=value": *a becomes "--name" (in name[size]) and *v "value";
 * otherwise both are left as they are (*v NULL: the value, if the option
 * takes one, is the next argument). */
void stress_opt_split(const char **a, const char **v, char *name, size_t size);

/* Inside the option loop (int i, argc, argv, const char *a, *v): the
 * option's value, from "--name=value" or the next argument. */
#define STRESS_ARG()                                                           \
    (v ? v : (i + 1 < argc ? argv[++i]                                         \
                           : (fprintf(stderr, "%s: %s needs a value\n", stress_prog, a), \
                              exit(2), "")))

#endif /* PP_STRESS_CLI_H */
