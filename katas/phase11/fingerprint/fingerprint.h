/* GIVEN: the C ABI of lib.rs, as the tests declare it to cffi. Do not edit.
 * Status codes: 0 ok, 2 bad input, -2 todo!() reached (not started), -3 another panic;
 * kata_last_error() holds the message of the last failure on this thread. Text in and out is
 * one component or entry per line: "<kind name>\t<hex bytes>". Buffers a call hands out are
 * freed with kata_free. */
#include <stddef.h>
#include <stdint.h>

const char *kata_last_error(void);
void kata_free(uint8_t *p, size_t n);
int32_t kata_collect(const char *root, uint8_t **out, size_t *out_len);
int32_t kata_encode(const uint8_t *const *ptrs, const size_t *lens, size_t n, uint8_t **out, size_t *out_len);
int32_t kata_digests(const uint8_t *salt, size_t salt_len, const char *comps, uint8_t **out, size_t *out_len);
int32_t kata_fingerprint(const uint8_t *salt, size_t salt_len, const char *comps, uint8_t **out, size_t *out_len);
int32_t kata_to_bytes(const char *fp, uint8_t **out, size_t *out_len);
int32_t kata_compare(const char *a, const char *b, uint32_t *out);
int32_t kata_verdict(const char *a, const char *b, int32_t *out);
int32_t kata_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *data, size_t n, uint8_t *out);
