/*
 * alloc.c -- every allocation pinpool makes for itself goes through here
 * (the entries' own data is the caller's, freed by its type).
 *
 * One place to count allocations -- so tests can show that the lock-free
 * calls allocate nothing -- and to inject failures later (the reliability
 * suite's allocator hook).  Table segments go through pp__node_alloc
 * (topology.c), which counts here too.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Atomic uint64_t pp__allocs;

void pp__alloc_note(void)
{
    pp__atomic_add_relaxed(&pp__allocs, 1);
}

uint64_t pp__alloc_count(void)
{
    return pp__atomic_load_relaxed(&pp__allocs);
}

void *pp__malloc(size_t size)
{
    pp__alloc_note();
    return malloc(size);
}

void *pp__calloc(size_t n, size_t size)
{
    pp__alloc_note();
    return calloc(n, size);
}

void *pp__realloc(void *p, size_t size)
{
    pp__alloc_note();
    return realloc(p, size);
}

void *pp__aligned_alloc(size_t align, size_t size)
{
    void *p;
    pp__alloc_note();
    if (posix_memalign(&p, align, size) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}

void pp__free(void *p)
{
    free(p);
}
