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
 * Direct I/O (PP_SWAP_DIRECT): the pool sets `direct` before open; the
 * device then bypasses the page cache (the file device opens its files
 * O_DIRECT) and sets `align` to what every write and read needs: buffer
 * address, length and offset all multiples of it.  The store hands out
 * space in pages, so an alignment of up to one page (4096) is all a device
 * may ask for; one that needs more fails its open with -EOPNOTSUPP, and
 * one whose storage refuses direct I/O with -EINVAL.  A short write or
 * read may stop anywhere, even inside a block: the caller goes on from the
 * block it stopped in.
 *
 * Every call returns a negative errno on failure, never sets errno.
 */
#ifndef PP_SWAPDEV_H
#define PP_SWAPDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pp__swapdev pp__swapdev_t;

/* submitting's answer for "go on: hand it to the kernel". */
#define PP__DEV_GO ((ssize_t)1 << 62)

/* The most alignment a device may ask for: the store's page. */
#define PP__SWAP_ALIGN 4096u

struct pp__swapdev {
    /* Makes the device's storage for nstreams streams under parent.
     * Pre: not open, `direct` set.  Post: 0, every stream empty and
     * `align` set, or -errno and nothing left behind (-EINVAL: direct I/O
     * refused; -EOPNOTSUPP: it needs more than page alignment). */
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
    /* The file descriptor of stream s, for engines that hand requests to
     * the kernel themselves (io_uring, ring.h): reads and writes through
     * it must be what read and write above would do.  -errno if the
     * device has none (the pool then runs the thread engine). */
    int (*fd)(pp__swapdev_t *d, unsigned s);
    /* Optional (NULL: none), for devices in tests.  submitting sees each
     * request before an engine hands it to the kernel: it may shorten *n,
     * or answer the request itself by returning its result (a count, or
     * -errno) instead of PP__DEV_GO, and it may block.  completed sees
     * each result as it comes back and returns the one to report (it may
     * also change the bytes read). */
    ssize_t (*submitting)(pp__swapdev_t *d, unsigned s, bool write, size_t *n, uint64_t off);
    ssize_t (*completed)(pp__swapdev_t *d, unsigned s, bool write, void *buf, size_t n,
                         ssize_t res);
    /* Removes everything open made (files, directory) and frees d.
     * Valid on a device that was never opened, or whose open failed. */
    void (*close)(pp__swapdev_t *d);
    /* Set by the pool before open: bypass the page cache (PP_SWAP_DIRECT). */
    bool direct;
    /* Set by open: the alignment of buffers, lengths and offsets that
     * write and read need (a power of two, at most PP__SWAP_ALIGN); 1:
     * none. */
    size_t align;
    /* The private directory (empty if the device has none). */
    char path[4096];
    void *impl;                        /* the device's own state */
};

/* The default device: a private directory made with mkdtemp under the
 * parent (mode 0700), one file per stream ("node<N>.swap", created O_EXCL
 * with mode 0600; with `direct`, opened O_DIRECT, and align is
 * PP__SWAP_ALIGN once statx's STATX_DIOALIGN, where the kernel reports it,
 * says that suffices).  Returns a device that is not open yet, or NULL. */
pp__swapdev_t *pp__swapdev_file_new(void);

#endif /* PP_SWAPDEV_H */
