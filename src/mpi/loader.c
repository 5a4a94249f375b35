/*
 * loader.c -- the home's loads for serves.
 *
 * The progress thread never waits on I/O, so it pins an entry to serve it
 * with PP_PIN_NOWAIT.  When that says PP_EAGAIN (the entry is on disk),
 * the request comes here: the loader thread (one per layer, made at the
 * first such request) pins the entry without PP_PIN_NOWAIT, which waits
 * for the load and returns its result, and hands the request back to the
 * progress thread with that result as a command (PP__CMD_LOADED: the
 * progress thread serves it, pp__home_loaded, then gives it back here,
 * pp__loader_done, which drops the loader's pin and frees it).  On 0
 * the loader's pin keeps the entry resident while the progress thread
 * serves it, and is dropped after; on an error (PP_EIO, PP_ECORRUPT,
 * PP_ENOMEM, PP_ESTALE) the remote pin gets that error.  So a load that
 * keeps failing is tried once or twice per remote request (the NOWAIT
 * pin queued one on the pool's swap thread; the loader's pin waits for it
 * and, if it failed, tries once itself), never in a loop, and the swap
 * copy stays for a later pin.
 */
#include "layer.h"

#include <stdlib.h>

static void *loader_main(void *arg)
{
    pp_mpi_t *m = arg;
    pthread_mutex_lock(&m->load_mu);
    for (;;) {
        while (m->load_q == NULL && !m->load_stop)
            pthread_cond_wait(&m->load_cv, &m->load_mu);
        pp__load_t *l = m->load_q;
        if (l == NULL)
            break;   /* stopping, and nothing queued */
        m->load_q = l->next;
        if (m->load_q == NULL)
            m->load_tail = NULL;
        pthread_mutex_unlock(&m->load_mu);
        l->rc = pp_pin(m->pool, l->ref, 0, NULL);   /* waits for the load */
        l->cmd = (pp__cmd_t){ .kind = PP__CMD_LOADED, .load = l };
        pp__common_push(m, &l->cmd);
        pthread_mutex_lock(&m->load_mu);
    }
    pthread_mutex_unlock(&m->load_mu);
    (void)pp_thread_exit(m->pool);
    return NULL;
}

int pp__loader_add(pp_mpi_t *m, int src, uint64_t id, uint64_t ref, uint32_t need)
{
    if (!m->loader_made) {
        if (pthread_create(&m->loader, NULL, loader_main, m) != 0) {
            pp__common_report(m, "no thread to load ref %#llx for rank %d: PP_ENOMEM",
                              (unsigned long long)ref, src);
            return PP_ENOMEM;
        }
        m->loader_made = true;
    }
    pp__load_t *l = malloc(sizeof *l);
    if (l == NULL)
        return PP_ENOMEM;
    *l = (pp__load_t){ .src = src, .id = id, .ref = ref, .need = need };
    pthread_mutex_lock(&m->load_mu);
    /* FIFO: a request is never passed over by later ones, however many come */
    if (m->load_tail != NULL)
        m->load_tail->next = l;
    else
        m->load_q = l;
    m->load_tail = l;
    pthread_cond_signal(&m->load_cv);
    pthread_mutex_unlock(&m->load_mu);
    return 0;
}

void pp__loader_done(pp_mpi_t *m, pp__load_t *l)
{
    if (l->rc == 0)
        (void)pp_unpin(m->pool, l->ref);   /* a serve holds its own pin now */
    free(l);
}

void pp__loader_stop(pp_mpi_t *m)
{
    if (m->loader_made) {
        pthread_mutex_lock(&m->load_mu);
        m->load_stop = true;
        pthread_cond_signal(&m->load_cv);
        pthread_mutex_unlock(&m->load_mu);
        pthread_join(m->loader, NULL);
        m->loader_made = false;
    }
    /* A load is queued only for a request its asker still waits for, and
     * no rank finishes while it waits, so none is left once the progress
     * thread has stopped; were one left, its pin is dropped here. */
    pthread_mutex_lock(&m->cmd_mu);
    for (pp__cmd_t **p = &m->cmd_head; *p != NULL;) {
        pp__cmd_t *c = *p;
        if (c->kind != PP__CMD_LOADED) {
            p = &c->next;
            continue;
        }
        *p = c->next;
        if (c->load->rc == 0)
            (void)pp_unpin(m->pool, c->load->ref);
        free(c->load);
    }
    m->cmd_tail = NULL;
    for (pp__cmd_t *c = m->cmd_head; c != NULL; c = c->next)
        m->cmd_tail = c;
    pthread_mutex_unlock(&m->cmd_mu);
}
