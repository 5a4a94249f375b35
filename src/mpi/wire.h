/*
 * wire.h -- the MPI layer's messages, as bytes.
 *
 * Every message starts with a header: a magic number, the protocol
 * version, its kind, the count of records that follow and a 32-bit aux
 * word (0); the records of a kind have a fixed size.  A RETURN carries,
 * between its header and its records, the message's 64-bit sequence
 * number from its sender, so that a duplicate is recognised: 64 bits
 * never wrap (a 32-bit one did, after 2^32 returns from one rank to one
 * home, and every later return was dropped as a duplicate).
 * The other kinds are "fixed" messages: the header (count 0) and a fixed
 * number of 64-bit fields.  A message from another rank is checked
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
#define PP__WIRE_VERSION 2u              /* 2: RETURN's sequence number is 64-bit */
#define PP__WIRE_HDR     16u              /* magic, version:16, kind:16, count, aux */
#define PP__WIRE_SEQ     8u               /* RETURN: its sequence number, after the header */

enum pp__wire_kind {
    PP__WIRE_RETURN = 1,                  /* weight going home: seq, then {ref, lo, hi} */
    PP__WIRE_REQ = 2,                     /* {id, home ref, version needed} */
    PP__WIRE_REPLY = 3,                   /* {id, status, version, size, 0, 0}, then the bytes */
    PP__WIRE_MINT = 4,                    /* {id, home ref} */
    PP__WIRE_MINTED = 5,                  /* {id, status, lo, hi} */
    PP__WIRE_FIN = 6,                     /* {messages sent to the receiver before it} */
    PP__WIRE_CLAIM = 7,                   /* {id, home ref, from, seq}: an import */
    PP__WIRE_CLAIMED = 8,                 /* {id, status} */
};

#define PP__WIRE_REQ_N    3u
#define PP__WIRE_REPLY_N  6u              /* header + 6 fields: 64 bytes */
#define PP__WIRE_MINT_N   2u
#define PP__WIRE_MINTED_N 4u
#define PP__WIRE_FIN_N    1u
#define PP__WIRE_CLAIM_N  4u
#define PP__WIRE_CLAIMED_N 2u
#define PP__WIRE_FIXED_MAX 6u

/* Bytes of a fixed message of nf fields. */
#define PP__WIRE_FIXED_SIZE(nf) (PP__WIRE_HDR + 8u * (nf))
/* Writes a fixed message of kind and fields f[0..nf). */
void pp__wire_fixed_pack(void *buf, unsigned kind, const uint64_t *f, unsigned nf);
/* The kind of a message whose header is sound (magic, version, a known
 * kind), or PP_ECORRUPT.  len: the message's length. */
int pp__wire_kind(const void *buf, size_t len);
/* Checks a fixed message of kind with nf fields and reads them into f:
 * 0, PP_ECORRUPT (wrong length, magic, version, kind or count).  A REPLY
 * is checked with len = its header's length (the bytes follow). */
int pp__wire_fixed_check(const void *buf, size_t len, unsigned kind, uint64_t *f, unsigned nf);

#define PP__WIRE_RETURN_REC 24u

typedef struct pp__wire_return {
    uint64_t ref;                         /* the home's local ref */
    uint64_t lo, hi;                      /* the weight: [lo, hi) */
} pp__wire_return_t;

/* Bytes a RETURN message of n records takes (0 if n is too large). */
size_t pp__wire_return_size(size_t n);
/* Writes a RETURN message of recs[0..n), sequence number seq, into buf
 * of pp__wire_return_size(n) bytes. */
void pp__wire_return_pack(void *buf, uint64_t seq, const pp__wire_return_t *recs, size_t n);
/* Checks a received message and, if it is a RETURN, gives its record
 * count and sequence number: 0, PP_ECORRUPT (bad length, magic, version,
 * kind or aux; or a record with lo >= hi), PP_EINVAL (NULL arguments; seq may be
 * NULL). */
int pp__wire_return_check(const void *buf, size_t len, size_t *n, uint64_t *seq);
/* Record i of a checked RETURN message. */
pp__wire_return_t pp__wire_return_get(const void *buf, size_t i);

#endif /* PP_MPI_WIRE_H */
