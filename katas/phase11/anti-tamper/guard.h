/* The guard's API: given, not yours to edit. You write guard.c; main.c (given) calls it.
 *
 * main.c answers requests "INDEX CHALLENGE": it prints HMAC-SHA256(secret[INDEX], CHALLENGE).
 * Before every answer it asks guard_integrity() and guard_tracer(); a check that does not say
 * GUARD_OK ends the program through guard_fail(name of the check). Only then does it ask
 * guard_secret() for the key, computes the HMAC, and wipes the key. guard_harden() runs first.
 */
#ifndef GUARD_H
#define GUARD_H

#include <stddef.h>

#define GUARD_OK 0
#define GUARD_TAMPERED 1
#define GUARD_TODO (-99)        /* a stub's answer: main.c reports "KATA_TODO <function>" */

#define GUARD_EXIT_TAMPERED 3   /* the exit status of a program that detected tampering */
#define GUARD_DIGEST_SIZE 32    /* SHA-256 */
#define GUARD_SECRET_MAX 64     /* the longest secret, in bytes */

/* The seal: SHA-256 of the file bytes of every executable PT_LOAD segment of the program, in
 * program-header order, stamped into the built binary by `python3 tamper.py seal PROGRAM`
 * after linking. It lives in its own section (.kata_seal, writable data), outside the bytes it
 * covers; an unsealed program holds the placeholder text main.c initialises it with. */
extern unsigned char kata_seal[GUARD_DIGEST_SIZE];

/* integrity: hash the program's own code as it is mapped in memory NOW (the same bytes the seal
 * covers), write the digest to `digest`, and compare it with kata_seal: GUARD_OK when equal,
 * GUARD_TAMPERED when not (or when the code cannot be found). */
int guard_integrity(unsigned char digest[GUARD_DIGEST_SIZE]);

/* tracer: GUARD_TAMPERED when a tracer (a debugger, strace, any ptrace user) is attached to the
 * process at the moment of the call, GUARD_OK otherwise. */
int guard_tracer(void);

/* strings: write secret number `index` (0 .. KATA_SECRET_COUNT-1 of secrets.h) to out and
 * return its length; -1 for an index out of range or cap too small. `digest` is what
 * guard_integrity wrote in this request: the decoding must give the secret only when it equals
 * kata_seal (a program whose check was patched out decodes garbage). The plain secret exists in
 * memory only in `out`, which main.c wipes after use. */
int guard_secret(int index, const unsigned char digest[GUARD_DIGEST_SIZE], unsigned char *out,
                 size_t cap);

/* failsafe: called once, first thing in main: no core dumps, not dumpable. GUARD_OK when done;
 * anything else and main.c refuses to run (guard_fail("harden")). */
int guard_harden(void);

/* failsafe: the end of a program that detected tampering; `check` is "integrity", "tracer" or
 * "harden".
 * Wipe what the guard holds, say which check failed on stderr (one line naming it), and end the
 * process at once with status GUARD_EXIT_TAMPERED, writing nothing to stdout and flushing no
 * stdio buffer. It does not return (a stub returns GUARD_TODO). */
int guard_fail(const char *check);

#endif
