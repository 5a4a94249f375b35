/*
 * swapdev.h -- the swap device: where the bytes of swap copies live.
 *
 * A small interface (as mimalloc keeps its OS layer behind one), so that
 * the store above it (swap.c) allocates space, checksums and compresses
 * without knowing where bytes go, and tests can put a failing device in
 * its place (tests/support/faultdev.h).
 *
 * A device holds one stream per node domain: a flat space of bytes
 * addressed by offset.  The store decides every offset; the device never
 * allocates.  Calls on different streams, and reads concurrent with writes
 * on the same stream at other offsets, may run on different threads at
 * once; a device must be safe for that (pread/pwrite are).
 *
 * Every call returns a negative errno on failure, never sets errno.
 */
#ifndef PP_SWAPDEV_H
#define PP_SWAPDEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pp__swapdev pp__swapdev_t;

struct pp__swapdev {
    /* Makes the device's storage for nstreams streams under parent.
     * Pre: not open.  Post: 0 and every stream empty, or -errno and
     * nothing left behind. */
    int (*open)(pp__swapdev_t *d, const char *parent, unsigned nstreams);
    /* Writes up to n > 0 bytes at off.  Returns the count written (> 0; may
     * be short: the caller continues or gives up) or -errno (-EIO,
     * -ENOSPC, ...). */
    ssize_t (*write)(pp__swapdev_t *d, unsigned s, const void *buf, size_t n, uint64_t off);
    /* Reads up to n > 0 bytes at off.  Returns the count read (0: nothing
     * there) or -errno. */
    ssize_t (*read)(pp__swapdev_t *d, unsigned s, void *buf, size_t n, uint64_t off);
    /* The bytes [off, off+len) are no longer needed: the device may give
     * their space back (the file device punches a hole).  0 or -errno; a
     * failure costs space, never data. */
    int (*drop)(pp__swapdev_t *d, unsigned s, uint64_t off, uint64_t len);
    /* Starts writing back what was written to stream s so far (the file
     * device: sync_file_range, without waiting), so swapped bytes leave
     * memory instead of lingering as dirty page cache.  0 or -errno. */
    int (*sync)(pp__swapdev_t *d, unsigned s);
    /* Removes everything open made (files, directory) and frees d.
     * Valid on a device that was never opened, or whose open failed. */
    void (*close)(pp__swapdev_t *d);
    /* The private directory (empty if the device has none). */
    char path[4096];
    void *impl;                        /* the device's own state */
};

/* The default device: a private directory made with mkdtemp under the
 * parent (mode 0700), one file per stream ("node<N>.swap", created O_EXCL
 * with mode 0600).  Returns a device that is not open yet, or NULL. */
pp__swapdev_t *pp__swapdev_file_new(void);

#endif /* PP_SWAPDEV_H */
