/*
 * internal.h -- every internal declaration, for code that sits above the
 * library: the tests, test hooks and yields (testing/), and the stress
 * programs.  The library's own files include only the header of their
 * layer, which includes the layers below it:
 *
 *   os/       what pinpool asks of the system: its allocations, errors and
 *             the abort, sleeping and waking, the swap device, io_uring
 *   core/     the pool's nodes, tables, entries and their state machine
 *             (entry.h), thread records and epochs, hot pins, tracking,
 *             reports, an entry's death and its push to the reclaimer
 *   swap/     the store, reserved memory, advice, the ends of I/O, the
 *             io_uring engine, the hand, loads, room, the swap threads
 *   reclaim/  each node's reclaimer thread: grace periods and frees
 *   api/      the calls of pinpool.h: pool, put and release, pins, scopes,
 *             statistics
 *   mpi/      the MPI layer (pinpool_mpi.h), on top of api/
 *   testing/  test hooks and yields; only in the testing variant
 *
 * Calls go only downward: a file calls only files listed before it in
 * PINPOOL_SOURCES (CMakeLists.txt), which lists the layers from the bottom
 * up and, within each, the files from the bottom up.  The test
 * layout.calls checks it on the compiled objects (cmake/check_calls.cmake).
 *
 * The sources are compiled twice (os/checks.h): the product, without test
 * points, yields or allocation hooks, and the testing variant
 * pinpool_testing (PP__TESTING=1), with them and with testing/.  Nothing
 * here is exported (hidden visibility); the tests link pinpool_testing, a
 * static library, and may call pp__* functions.
 */
#ifndef PP_INTERNAL_H
#define PP_INTERNAL_H

#include "api/api.h"

#endif /* PP_INTERNAL_H */
