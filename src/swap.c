/*
 * swap.c -- the swap stream used inside a type's save/load.
 *
 * The swap store is not built yet: pools refuse swap_dir (PP_ENOTSUP), so
 * the pool never calls a type's save or load, and these two calls, which
 * only make sense inside them, say so instead of pretending.
 */
#include "internal.h"

int pp_write(pp_writer_t *w, const void *buf, size_t n)
{
    (void)w;
    (void)buf;
    (void)n;
    return PP_ENOTSUP;
}

int pp_read(pp_reader_t *r, void *buf, size_t n)
{
    (void)r;
    (void)buf;
    (void)n;
    return PP_ENOTSUP;
}
