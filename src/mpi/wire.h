/*
 * wire.h -- the MPI layer's messages, as bytes (groundwork).
 *
 * Every message starts with a header: a magic number, the protocol
 * version, its kind and the count of records that follow; the records of
 * a kind have a fixed size.  A message from another rank is checked
 * before anything in it is used: its length must be exactly the header
 * plus count records, the magic and version must match, and the kind must
 * be known; anything else is PP_ECORRUPT and is never acted on (garbage
 * from another rank costs an error report, never a wrong count).
 *
 * Integers are little-endian on the wire whatever the host (the layer
 * runs on x86-64 and aarch64 alike), written and read byte by byte.
 */
#ifndef PP_MPI_WIRE_H
#define PP_MPI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define PP__WIRE_MAGIC   0x70706d31u      /* "ppm1" */
#define PP__WIRE_VERSION 1u
#define PP__WIRE_HDR     12u              /* magic, version:16, kind:16, count */

enum pp__wire_kind {
    PP__WIRE_RETURN = 1,                  /* weight going home: {ref, lo, hi} */
};

#define PP__WIRE_RETURN_REC 24u

typedef struct pp__wire_return {
    uint64_t ref;                         /* the home's local ref */
    uint64_t lo, hi;                      /* the weight: [lo, hi) */
} pp__wire_return_t;

/* Bytes a RETURN message of n records takes (0 if n is too large). */
size_t pp__wire_return_size(size_t n);
/* Writes a RETURN message of recs[0..n) into buf (pp__wire_return_size(n)
 * bytes). */
void pp__wire_return_pack(void *buf, const pp__wire_return_t *recs, size_t n);
/* Checks a received message and, if it is a RETURN, gives its record
 * count: 0 and *n, PP_ECORRUPT (bad length, magic, version or kind; or a
 * record with lo >= hi), PP_EINVAL (NULL arguments). */
int pp__wire_return_check(const void *buf, size_t len, size_t *n);
/* Record i of a checked RETURN message. */
pp__wire_return_t pp__wire_return_get(const void *buf, size_t i);

#endif /* PP_MPI_WIRE_H */
