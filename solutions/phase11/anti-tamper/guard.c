/* anti-tamper: the guard of a secret-using program (reference). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "guard.h"
#include "secrets.h"
#include "sha256.h"

/* ------------------------------------------------------------------ integrity */

struct code_hash {
    sha256_ctx ctx;
    int segments;
};

/* dl_iterate_phdr lists the program itself first: hash its executable PT_LOAD segments as they
 * are mapped (the loader maps p_filesz bytes of the file at dlpi_addr + p_vaddr). */
static int hash_program_code(struct dl_phdr_info *info, size_t size, void *data) {
    struct code_hash *h = data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            sha256_update(&h->ctx, (const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_filesz);
            h->segments++;
        }
    }
    return 1; /* the first object only */
}

int guard_integrity(unsigned char digest[GUARD_DIGEST_SIZE]) {
    struct code_hash h = {.segments = 0};
    sha256_init(&h.ctx);
    dl_iterate_phdr(hash_program_code, &h);
    sha256_final(&h.ctx, digest);
    unsigned char diff = h.segments == 0;
    for (int i = 0; i < GUARD_DIGEST_SIZE; i++) diff |= digest[i] ^ kata_seal[i];
    return diff ? GUARD_TAMPERED : GUARD_OK;
}

/* ------------------------------------------------------------------ tracer */

/* TracerPid of /proc/self/status, read at every call (a debugger can attach at any time). */
int guard_tracer(void) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return GUARD_TAMPERED; /* cannot tell: fail safe */
    ssize_t n, got = 0;
    while (got < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += n;
    close(fd);
    buf[got] = 0;
    const char *p = strstr(buf, "\nTracerPid:");
    if (!p) return GUARD_TAMPERED;
    return strtol(p + 11, NULL, 10) != 0 ? GUARD_TAMPERED : GUARD_OK;
}

/* ------------------------------------------------------------------ strings */

/* A keystream byte for secret n, position j: a non-linear hash of both, evaluated by the compiler
 * for the stored bytes and at run time for the decoding. No period, no constant step. */
#define KS(n, j)                                                                       \
    ((unsigned char)((((((j) + 1u) * 2654435761u) ^ (((n) + 3u) * 0x85EBCA6Bu)) >> 13) ^ \
                     ((j) * (j) * 97u + (n) * 29u + 0x5Au)))
#define ENC(byte, j, n) (unsigned char)((byte) ^ KS(n, j)),
#define ROW(n) {KATA_SECRET_##n##_LEN, {KATA_SECRET_##n(ENC)}},

static const struct {
    unsigned char len;
    unsigned char bytes[GUARD_SECRET_MAX];
} vault[KATA_SECRET_COUNT] = {KATA_SECRET_LIST(ROW)};

int guard_secret(int index, const unsigned char digest[GUARD_DIGEST_SIZE], unsigned char *out,
                 size_t cap) {
    if (index < 0 || index >= KATA_SECRET_COUNT || vault[index].len > cap) return -1;
    /* volatile: the compiler must not fold vault ^ KS into plain bytes of its own */
    const volatile unsigned char *enc = vault[index].bytes;
    unsigned char diff = 0;
    for (int i = 0; i < GUARD_DIGEST_SIZE; i++) diff |= digest[i] ^ kata_seal[i];
    /* a digest that is not the seal turns every byte to garbage: a patched-out check decodes
     * nothing useful */
    for (unsigned j = 0; j < vault[index].len; j++)
        out[j] = enc[j] ^ KS((unsigned)index, j) ^
                 ((digest[j % GUARD_DIGEST_SIZE] ^ kata_seal[j % GUARD_DIGEST_SIZE]) | diff);
    return vault[index].len;
}

/* ------------------------------------------------------------------ failsafe */

int guard_harden(void) {
    struct rlimit none = {0, 0};
    int bad = setrlimit(RLIMIT_CORE, &none) != 0;
    bad |= prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0;
    return bad ? GUARD_TAMPERED : GUARD_OK;
}

int guard_fail(const char *check) {
    char line[96];
    int n = snprintf(line, sizeof line, "guard: %s check failed\n", check);
    if (n > (int)sizeof line - 1) n = sizeof line - 1;
    if (write(STDERR_FILENO, line, (size_t)n) < 0) { /* nothing more to say */
    }
    _exit(GUARD_EXIT_TAMPERED); /* no atexit handlers, no stdio flush */
}
