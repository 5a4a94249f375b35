/*
 * swapdev.c -- the default swap device: one file per node domain in a
 * private directory.  See swapdev.h for the interface.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/os.h"
#include "os/swapdev.h"

typedef struct pp__filedev {
    unsigned nstreams;
    int *fds;                          /* [nstreams], -1 when not created */
} pp__filedev_t;

static void filedev_stream_name(const pp__swapdev_t *d, unsigned s, char *out, size_t len)
{
    snprintf(out, len, "%s/node%u.swap", d->path, s);
}

static void filedev_close(pp__swapdev_t *d)
{
    pp__filedev_t *f = d->impl;
    if (f != NULL) {
        for (unsigned s = 0; s < f->nstreams; s++) {
            if (f->fds[s] < 0)
                continue;
            char name[sizeof d->path + 32];
            filedev_stream_name(d, s, name, sizeof name);
            close(f->fds[s]);
            unlink(name);
        }
        pp__alloc_free(f->fds);
        pp__alloc_free(f);
    }
    if (d->path[0] != '\0')
        rmdir(d->path);
    pp__alloc_free(d);
}

/* With O_DIRECT: 0 if page-aligned buffers, lengths and offsets suffice
 * for fd; -EINVAL if its file system does no direct I/O, -EOPNOTSUPP if it
 * needs more alignment.  Where the kernel does not report the alignment
 * (statx without STATX_DIOALIGN, Linux before 6.1, or a file system that
 * does not fill it in), the open's success is taken as the answer: 4096
 * covers every logical block size up to a page. */
static int filedev_dio_check(int fd)
{
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
        if (sx.stx_dio_mem_align == 0 || sx.stx_dio_offset_align == 0)
            return -EINVAL;
        if (sx.stx_dio_mem_align > PP__SWAP_ALIGN || sx.stx_dio_offset_align > PP__SWAP_ALIGN)
            return -EOPNOTSUPP;
    }
#else
    (void)fd;
#endif
    return 0;
}

static int filedev_open(pp__swapdev_t *d, const char *parent, unsigned nstreams)
{
    pp__filedev_t *f = pp__alloc_zeroed(1, sizeof *f);
    if (f == NULL)
        return -ENOMEM;
    f->fds = pp__alloc_bytes(nstreams * sizeof *f->fds);
    if (f->fds == NULL) {
        pp__alloc_free(f);
        return -ENOMEM;
    }
    for (unsigned s = 0; s < nstreams; s++)
        f->fds[s] = -1;
    f->nstreams = nstreams;
    d->impl = f;
    if (snprintf(d->path, sizeof d->path, "%s/pinpool-XXXXXX", parent) >= (int)sizeof d->path) {
        d->path[0] = '\0';
        return -ENAMETOOLONG;
    }
    if (mkdtemp(d->path) == NULL) {      /* mode 0700 */
        int err = errno;
        d->path[0] = '\0';
        return -err;
    }
    int oflags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | (d->direct ? O_DIRECT : 0);
    for (unsigned s = 0; s < nstreams; s++) {
        char name[sizeof d->path + 32];
        filedev_stream_name(d, s, name, sizeof name);
        int fd = open(name, oflags, 0600);
        if (fd < 0) {
            int err = errno;
            /* A file system that refuses O_DIRECT may do so only after it
             * made the file (tmpfs before Linux 6.6): the directory is
             * private, so whatever is there is ours. */
            if (d->direct && err == EINVAL)
                unlink(name);
            return -err;                 /* filedev_close removes what exists */
        }
        f->fds[s] = fd;
        if (d->direct) {
            int rc = filedev_dio_check(fd);
            if (rc != 0)
                return rc;
        }
    }
    d->align = d->direct ? PP__SWAP_ALIGN : 1;
    return 0;
}

static ssize_t filedev_write(pp__swapdev_t *d, unsigned s, const void *buf, size_t n,
                             uint64_t off)
{
    pp__filedev_t *f = d->impl;
    ssize_t r;
    do
        r = pwrite(f->fds[s], buf, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static ssize_t filedev_read(pp__swapdev_t *d, unsigned s, void *buf, size_t n, uint64_t off)
{
    pp__filedev_t *f = d->impl;
    ssize_t r;
    do
        r = pread(f->fds[s], buf, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static int filedev_drop(pp__swapdev_t *d, unsigned s, uint64_t off, uint64_t len)
{
    pp__filedev_t *f = d->impl;
    if (fallocate(f->fds[s], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                  (off_t)len) != 0)
        return -errno;   /* e.g. EOPNOTSUPP: the space is reused, not returned */
    return 0;
}

static int filedev_sync(pp__swapdev_t *d, unsigned s)
{
    pp__filedev_t *f = d->impl;
    if (sync_file_range(f->fds[s], 0, 0, SYNC_FILE_RANGE_WRITE) != 0)
        return -errno;
    return 0;
}

static int filedev_fd(pp__swapdev_t *d, unsigned s)
{
    pp__filedev_t *f = d->impl;
    return f->fds[s];
}

pp__swapdev_t *pp__swapdev_file_new(void)
{
    pp__swapdev_t *d = pp__alloc_zeroed(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->open = filedev_open;
    d->write = filedev_write;
    d->read = filedev_read;
    d->drop = filedev_drop;
    d->sync = filedev_sync;
    d->fd = filedev_fd;
    d->close = filedev_close;
    return d;
}
