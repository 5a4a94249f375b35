/*
 * vectype.h -- a type with save and load for the tests of packing: a
 * vector whose bytes live out of line (so an entry's bytes are not its
 * data), written by save in chunks, its calls counted (atomically: they
 * run on pool and layer threads) and its failures switchable.
 */
#ifndef PP_TESTS_VECTYPE_H
#define PP_TESTS_VECTYPE_H

#include <stdatomic.h>
#include <stdlib.h>

#include "pinpool.h"

#define VEC_MAGIC 0x7665637665637631ull

typedef struct vec {
    uint64_t magic;
    size_t n;
    unsigned char *bytes;
} vec_t;

typedef struct vt {
    pp_type_t type;                      /* type.ctx == this */
    atomic_int fail_save, fail_load, empty;
    atomic_int saves, loads, frees;      /* successful saves and loads; frees */
    size_t chunk;                        /* save writes the bytes in chunks of this */
} vt_t;

/* The entry's size: what pp_put is told, and what save and load see. */
static inline size_t vec_size(size_t n) { return sizeof(vec_t) + n; }

/* A vector of n bytes of fill_pattern(seed) (tests/helpers.h). */
static inline vec_t *vec_new(size_t n, uint64_t seed)
{
    vec_t *v = malloc(sizeof *v);
    unsigned char *b = malloc(n ? n : 1);
    if (v == NULL || b == NULL)
        abort();
    *v = (vec_t){ VEC_MAGIC, n, b };
    fill_pattern(b, n, seed);
    return v;
}

static inline bool vec_check(const void *data, size_t n, uint64_t seed)
{
    const vec_t *v = data;
    return v != NULL && v->magic == VEC_MAGIC && v->n == n && check_pattern(v->bytes, n, seed);
}

static inline void vec_free(void *data, size_t size, void *ctx)
{
    (void)size;
    vt_t *vt = ctx;
    vec_t *v = data;
    atomic_fetch_add(&vt->frees, 1);
    free(v->bytes);
    free(v);
}

static inline int vec_save(const void *data, size_t size, pp_writer_t *w, void *ctx)
{
    vt_t *vt = ctx;
    const vec_t *v = data;
    if (v->magic != VEC_MAGIC || size != vec_size(v->n))
        return -1;
    if (atomic_load(&vt->empty))
        return 0;
    if (atomic_load(&vt->fail_save) || pp_write(w, NULL, 1) != PP_EINVAL)
        return -1;
    int rc = pp_write(w, &v->n, sizeof v->n);
    for (size_t at = 0; rc == 0 && at < v->n; at += vt->chunk) {
        size_t k = v->n - at < vt->chunk ? v->n - at : vt->chunk;
        rc = pp_write(w, v->bytes + at, k);
    }
    if (rc != 0)
        return rc;
    atomic_fetch_add(&vt->saves, 1);
    return 0;
}

static inline int vec_load(void **data, size_t size, pp_reader_t *r, void *ctx)
{
    vt_t *vt = ctx;
    if (atomic_load(&vt->fail_load))
        return -1;
    size_t n;
    if (pp_read(r, &n, sizeof n) != 0 || size != vec_size(n) || pp_read_left(r) != n)
        return -1;
    vec_t *v = malloc(sizeof *v);
    unsigned char *b = malloc(n ? n : 1);
    if (v == NULL || b == NULL || pp_read(r, b, n) != 0) {
        free(v);
        free(b);
        return -1;
    }
    *v = (vec_t){ VEC_MAGIC, n, b };
    *data = v;
    atomic_fetch_add(&vt->loads, 1);
    return 0;
}

static inline void vt_init(vt_t *vt, size_t chunk)
{
    memset(vt, 0, sizeof *vt);
    vt->chunk = chunk;
    vt->type = (pp_type_t){ .name = "vec", .free = vec_free, .save = vec_save,
                            .load = vec_load, .ctx = vt };
}

#endif /* PP_TESTS_VECTYPE_H */
