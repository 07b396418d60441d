/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): given, not yours to edit. */
#ifndef KATA_SHA256_H
#define KATA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_SIZE 32

typedef struct {
    uint32_t h[8];
    uint64_t length;       /* bytes hashed so far */
    unsigned char block[64];
    size_t used;           /* bytes waiting in block */
} sha256_ctx;

void sha256_init(sha256_ctx *ctx);
void sha256_update(sha256_ctx *ctx, const void *data, size_t n);
void sha256_final(sha256_ctx *ctx, unsigned char out[SHA256_SIZE]); /* wipes ctx */
void sha256(const void *data, size_t n, unsigned char out[SHA256_SIZE]);

/* HMAC-SHA256(key, msg). Every copy of the key it makes is wiped before it returns. */
void hmac_sha256(const unsigned char *key, size_t key_len, const unsigned char *msg,
                 size_t msg_len, unsigned char out[SHA256_SIZE]);

#endif
