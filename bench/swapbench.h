/*
 * swapbench.h -- what swapbench.c (the harness, the pool, the pwrite/pread
 * baseline) shares with swapbench_io.c (the io_uring baseline): the shape
 * of the run, and the helpers that make both baselines do the same memory
 * work and the same checks as the pool (swapbench.c's header comment says
 * what that work is).
 */
#ifndef SWAPBENCH_H
#define SWAPBENCH_H

#include <stddef.h>

/* The run's shape, set once from the command line by swapbench.c. */
extern size_t n_entries, entry_size, mem_limit;
extern int keep_all;                    /* --keep-all */
extern const char *swap_dir;

_Noreturn void fail_sys(const char *call, const char *what);   /* with errno */
double now_s(void);                     /* CLOCK_MONOTONIC, seconds */

/* syncfs of swap_dir before each timed swap-out (untimed). */
void settle(void);

/* The bytes an O_DIRECT baseline moves per entry: whole 4096-byte blocks. */
size_t padded(void);

/* An entry's buffer: malloc'd, or with aligned page-aligned and padded to
 * padded() bytes (zeros past entry_size).  NULL if out of memory. */
unsigned char *entry_alloc(int aligned);

/* n_entries buffers filled with round r's pattern (fail_sys on ENOMEM). */
unsigned char **make_buffers(int r, int aligned);

/* Exits with a message unless p holds entry i of round r. */
void check(const unsigned char *p, size_t i, int r, const char *impl);

/* The buffers a baseline's swap-in holds at once, as the pool holds its
 * resident entries: mem_limit / entry_size (n_entries with --keep-all). */
size_t swapin_keep(void);

/* Frees ring[0, keep) and sets them NULL. */
void free_ring(unsigned char **ring, size_t keep);

/* A new baseline file in swap_dir (O_EXCL; O_DIRECT with direct), named
 * after the process, tag and round; its name into path[0, size). */
int open_base(char *path, size_t size, const char *tag, int r, int direct);

/* Closes and removes a baseline file. */
void close_base(int fd, const char *path);

/* swapbench_io.c: the io_uring baseline. */

/* 0 if io_uring works here (a ring made, a no-op through it), else -errno
 * with why in why[0, n). */
int uring_probe(char *why, size_t n);

/* One round r of the io_uring baseline at depth requests in flight,
 * buffered or O_DIRECT: the seconds of its timed swap-out (secs[0]) and
 * timed swap-in (secs[1]), each of n_entries * entry_size bytes. */
void run_uring(int r, int direct, unsigned depth, double secs[2]);

#endif /* SWAPBENCH_H */
