/* anti-tamper: the guard of a secret-using program. You write this file; guard.h says what each
 * function must do, main.c (given) calls them, README.md says how the tests attack the result. */
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
#include "secrets.h" /* the tests write it: KATA_SECRET_COUNT, KATA_SECRET_<n>(B), ... */
#include "sha256.h"

/* ------------------------------------------------------------------ integrity */

int guard_integrity(unsigned char digest[GUARD_DIGEST_SIZE]) {
    /* TODO: SHA-256 of the program's executable PT_LOAD segments as mapped now (dl_iterate_phdr),
     * into digest; GUARD_OK when it equals kata_seal, GUARD_TAMPERED when not. */
    (void)digest;
    return GUARD_TODO;
}

/* ------------------------------------------------------------------ tracer */

int guard_tracer(void) {
    /* TODO: GUARD_TAMPERED when a tracer is attached right now, GUARD_OK when none is. */
    return GUARD_TODO;
}

/* ------------------------------------------------------------------ strings */

int guard_secret(int index, const unsigned char digest[GUARD_DIGEST_SIZE], unsigned char *out,
                 size_t cap) {
    /* TODO: keep the secrets of secrets.h encoded in the binary (no plain copy anywhere); decode
     * secret `index` into out, correct only when digest equals kata_seal; return its length. */
    (void)index, (void)digest, (void)out, (void)cap;
    return GUARD_TODO;
}

/* ------------------------------------------------------------------ failsafe */

int guard_harden(void) {
    /* TODO: no core dumps (RLIMIT_CORE 0), not dumpable (PR_SET_DUMPABLE 0). */
    return GUARD_TODO;
}

int guard_fail(const char *check) {
    /* TODO: wipe, one line on stderr naming `check`, end the process at once with status
     * GUARD_EXIT_TAMPERED; never return. */
    (void)check;
    return GUARD_TODO;
}
