/*
 * proxy.c -- a rank's proxies of other ranks' refs (layer.h, pp__proxy_t):
 * its local owners of each and the intervals of weight it holds, one
 * table per home rank.  The owners (owners.c) make, count and give them
 * back; the remote side (remote.c) asks whether a ref is owned here
 * before it caches a copy.  Everything here is under own_mu.
 */
#include "layer.h"

#include <stdlib.h>

/* The proxy of ref of home rank, or NULL. */
pp__proxy_t *pp__proxy_find(pp_mpi_t *m, uint32_t rank, uint64_t ref)
{
    uint64_t v;
    if (!pp__ht_get(&m->proxies[rank], ref, &v))
        return NULL;
    return (pp__proxy_t *)(uintptr_t)v;
}

/* Takes p, the proxy of ref, out of its table and frees it. */
void pp__proxy_remove(pp_mpi_t *m, uint32_t rank, uint64_t ref, pp__proxy_t *p)
{
    (void)pp__ht_remove(&m->proxies[rank], ref);
    pp__wset_free(&p->held);
    free(p);
}

/* Is ref owned here (remote.c: a copy is cached only then)?  own_mu held. */
bool pp__proxy_held(pp_mpi_t *m, uint32_t rank, uint64_t ref)
{
    pp__proxy_t *p = pp__proxy_find(m, rank, ref);
    return p != NULL && p->owners > 0;
}
