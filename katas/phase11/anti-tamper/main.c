/* The guarded program: given, not yours to edit (you write guard.c).
 *
 *   guard INDEX CHALLENGE_HEX   print HMAC-SHA256(secret[INDEX], CHALLENGE) in hex, exit 0
 *   guard --serve               the same for each line "INDEX CHALLENGE_HEX" of stdin, one
 *                               answer line each (flushed); and two probes the tests use:
 *                               "probe": "dumpable=D core=C" (prctl PR_GET_DUMPABLE and the
 *                               RLIMIT_CORE soft limit, read with raw system calls);
 *                               "scan HEX": "found N", the number of places in this process's
 *                               readable memory that hold the bytes HEX names (XOR 0xA5 each,
 *                               so the needle itself is never in memory);
 *                               "poke OFFSET MASK": XOR the byte of the running program's code
 *                               that file offset OFFSET (hex) maps to with MASK (hex), through
 *                               /proc/self/mem, as a debugger plants a breakpoint: "poked";
 *                               "attach": a child process of the program attaches to it as its
 *                               tracer (PTRACE_SEIZE) and stays attached: "attached"
 *
 * Exit status: 0 answered; 2 bad usage; 3 (GUARD_EXIT_TAMPERED) tampering detected;
 * 99 a stub was reached ("KATA_TODO <function>" on stderr).
 *
 * The probes use raw system calls and helpers of this file only, never a libc function that a
 * function of the same name in guard.c would replace: what they report is the process's.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guard.h"
#include "sha256.h"

/* The seal (see guard.h): tamper.py seal overwrites these 32 bytes in the built file. */
__attribute__((section(".kata_seal"), used, aligned(32)))
unsigned char kata_seal[GUARD_DIGEST_SIZE] = "unsealed: run tamper.py seal it";

#define CHALLENGE_MAX 256

/* Raw system calls: what the probes report cannot be changed by a function of the same name. */
static long raw3(long nr, long a, long b, long c) {
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = nr, x0 __asm__("x0") = a, x1 __asm__("x1") = b,
                  x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
#else
    return syscall(nr, a, b, c);
#endif
}

static long raw4(long nr, long a, long b, long c, long d) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = nr, x0 __asm__("x0") = a, x1 __asm__("x1") = b,
                  x2 __asm__("x2") = c, x3 __asm__("x3") = d;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#else
    return syscall(nr, a, b, c, d);
#endif
}


static void todo(const char *function) {
    fprintf(stderr, "KATA_TODO %s\n", function);
    fflush(stderr);
    _exit(99);
}

static volatile int refusing;

static long text_length(const char *s) {
    long n = 0;
    while (s[n]) n++;
    return n;
}

static void say(int fd, const char *s) { raw3(SYS_write, fd, (long)s, text_length(s)); }

/* exit() runs destructors and atexit handlers; guard_fail must end the process without them
 * (_exit). A destructor, not atexit(): no function of guard.c can unregister it. */
__attribute__((destructor)) static void after_refusal(void) {
    if (refusing) say(2, "main.c: exit handlers ran after the refusal\n");
}

/* The refusal: guard_fail must not return. Kept out of line, so the tests can patch it. */
__attribute__((noinline, noclone, used)) void kata_refuse(const char *check) {
    refusing = 1;
    int r = guard_fail(check);
    if (r == GUARD_TODO) {
        fprintf(stderr, "KATA_TODO guard_fail (the %s check failed)\n", check);
        fflush(stderr);
        _exit(99);
    }
}

/* Code this program never calls: a patch here changes nothing the program does, only its hash. */
__attribute__((noinline, noclone, used)) long kata_unused_diagnostics(const char *text, long rounds) {
    long acc = 0x5bd1e995;
    for (long r = 0; r < rounds; r++)
        for (const char *p = text; *p; p++) {
            acc ^= (unsigned char)*p;
            acc *= 0x100000001b3L;
            acc ^= acc >> 29;
            if ((acc & 0xfff) == 0x7a3) fprintf(stderr, "diagnostics: round %ld at %p\n", r, p);
        }
    if (acc % 7 == 3) fprintf(stderr, "diagnostics: %ld\n", acc);
    return acc;
}

/* guard_secret runs 16 KB deeper in the stack than anything main.c calls after it returns, so
 * what its frame leaves behind (a decoded copy that was never wiped) stays where the tests'
 * scan can find it, as it would stay in a core file or a swapped-out page. */
__attribute__((noinline, noclone)) static int fetch_secret(int index, const unsigned char *digest,
                                                           unsigned char *key, size_t cap) {
    volatile unsigned char depth[16384];
    depth[0] = 0;
    int n = guard_secret(index, digest, key, cap);
    depth[sizeof depth - 1] = (unsigned char)n; /* keeps the array, and the depth, across the call */
    return n;
}

static int answer(int index, const unsigned char *challenge, size_t clen,
                  unsigned char mac[SHA256_SIZE]) {
    unsigned char digest[GUARD_DIGEST_SIZE] = {0};
    unsigned char key[GUARD_SECRET_MAX];
    int r = guard_integrity(digest);
    if (r == GUARD_TODO) {
        /* integrity not written yet: run the rest as if it had checked (never earns its points) */
        fprintf(stderr, "KATA_TODO guard_integrity (skipped)\n");
        memcpy(digest, kata_seal, sizeof digest);
    } else if (r != GUARD_OK) {
        kata_refuse("integrity");
    }
    r = guard_tracer();
    if (r == GUARD_TODO)
        fprintf(stderr, "KATA_TODO guard_tracer (skipped)\n");
    else if (r != GUARD_OK)
        kata_refuse("tracer");
    int n = fetch_secret(index, digest, key, sizeof key);
    if (n == GUARD_TODO) todo("guard_secret");
    explicit_bzero(digest, sizeof digest);
    if (n < 0 || n > (int)sizeof key) {
        explicit_bzero(key, sizeof key);
        return -1;
    }
    hmac_sha256(key, (size_t)n, challenge, clen, mac);
    explicit_bzero(key, sizeof key);
    return 0;
}

static int hex_digit(char c);
static long unhex_raw(const char *s, unsigned char *out, long cap);

static int unhex(const char *s, unsigned char *out, size_t cap) {
    long n = unhex_raw(s, out, (long)cap);
    while (*s == ' ') s++;
    if (n < 0 || s[2 * n] != 0) return -1; /* an odd digit or a stray character */
    return (int)n;
}

static int request(const char *index_text, const char *hex) {
    unsigned char challenge[CHALLENGE_MAX], mac[SHA256_SIZE];
    char *end;
    long index = strtol(index_text, &end, 10);
    int clen = unhex(hex, challenge, sizeof challenge);
    if (*end || clen < 0) {
        fprintf(stderr, "guard: expected INDEX CHALLENGE_HEX, got \"%s %s\"\n", index_text, hex);
        return 2;
    }
    if (answer((int)index, challenge, (size_t)clen, mac) != 0) {
        fprintf(stderr, "guard: no secret number %ld\n", index);
        return 2;
    }
    for (int i = 0; i < SHA256_SIZE; i++) printf("%02x", mac[i]);
    printf("\n");
    fflush(stdout);
    return 0;
}

static char *put_long(char *p, long v) {
    char digits[24];
    int n = 0;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    if (v < 0) *p++ = '-';
    do digits[n++] = (char)('0' + u % 10); while ((u /= 10) != 0);
    while (n > 0) *p++ = digits[--n];
    return p;
}

static char *put_text(char *p, const char *s) {
    while (*s) *p++ = *s++;
    return p;
}

static void say_number(const char *label, long v) {
    char line[64], *p = put_long(put_text(line, label), v);
    *p++ = '\n';
    *p = 0;
    say(1, line);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A hex number at *s, moving *s past it; -1 when there is none. */
static long hex_number(const char **s) {
    long v = 0;
    int any = 0, d;
    while (**s == ' ') (*s)++;
    while ((d = hex_digit(**s)) >= 0) v = v * 16 + d, (*s)++, any = 1;
    return any ? v : -1;
}

static int contains(const char *line, const char *word) {
    for (; *line; line++) {
        int i = 0;
        while (word[i] && line[i] == word[i]) i++;
        if (!word[i]) return 1;
    }
    return 0;
}

static void probe(void) {
    struct rlimit core = {0, 0};
    long dumpable = raw3(SYS_prctl, PR_GET_DUMPABLE, 0, 0);
    long r = raw4(SYS_prlimit64, 0, RLIMIT_CORE, 0, (long)&core);
    char line[96], *p = put_long(put_text(line, "dumpable="), dumpable);
    p = put_long(put_text(p, " core="), r == 0 ? (long)core.rlim_cur : -1);
    *p++ = '\n';
    *p = 0;
    say(1, line);
}

static char maps[1 << 16], rest[8192];
static long rest_len;

/* /proc/self/maps, opened with raw system calls; read it with next_maps. */
static int open_maps(void) {
    rest_len = 0;
    return (int)raw4(SYS_openat, AT_FDCWD, (long)"/proc/self/maps", O_RDONLY, 0);
}

/* The next whole lines of /proc/self/maps into maps[], 0-terminated: their length, 0 at the end,
 * -1 on an error. A piece of the buffer's size at a time, so that no listing is too long to read
 * to its end (a program with thousands of mappings must not hide the last of them). */
static long next_maps(int fd) {
    long got = 0, r = 0, end;
    for (long i = 0; i < rest_len; i++) maps[got++] = rest[i];
    rest_len = 0;
    while (got < (long)sizeof maps - 1 &&
           (r = raw3(SYS_read, fd, (long)(maps + got), (long)sizeof maps - 1 - got)) > 0)
        got += r;
    if (r < 0) return -1;
    end = got;
    if (got == (long)sizeof maps - 1) { /* full: keep the unfinished last line for the next call */
        while (end > 0 && maps[end - 1] != '\n') end--;
        if (end == 0 || got - end > (long)sizeof rest) return -1;
        for (long i = end; i < got; i++) rest[rest_len++] = maps[i];
    }
    maps[end] = 0;
    return end;
}

/* One line of maps: "lo-hi perms offset ...", the line cut at its end; 0 when malformed. */
static int map_line(char **cursor, unsigned long *lo, unsigned long *hi, char perms[5],
                    unsigned long *offset, char **line) {
    char *p = *cursor, *end = p;
    while (*end && *end != '\n') end++;
    *cursor = *end ? end + 1 : end;
    *end = 0;
    *line = p;
    const char *q = p;
    long a = hex_number(&q);
    if (a < 0 || *q++ != '-') return 0;
    long b = hex_number(&q);
    if (b < 0 || *q++ != ' ') return 0;
    for (int i = 0; i < 4; i++) perms[i] = *q ? *q++ : '-';
    perms[4] = 0;
    long off = hex_number(&q);
    if (off < 0) return 0;
    *lo = (unsigned long)a, *hi = (unsigned long)b, *offset = (unsigned long)off;
    return 1;
}

static long unhex_raw(const char *s, unsigned char *out, long cap) {
    long n = 0;
    int hi, lo;
    while (*s == ' ') s++;
    while ((hi = hex_digit(s[0])) >= 0 && (lo = hex_digit(s[1])) >= 0) {
        if (n == cap) return -1;
        out[n++] = (unsigned char)(hi * 16 + lo);
        s += 2;
    }
    return n;
}

/* How many places of readable memory hold needle (given XOR 0xA5). */
static void scan(const char *hex) {
    unsigned char needle[GUARD_SECRET_MAX];
    long n = unhex_raw(hex, needle, sizeof needle), found = 0;
    int fd = n > 0 ? open_maps() : -1;
    long got = -1;
    while (fd >= 0 && (got = next_maps(fd)) > 0) {
        for (char *cursor = maps; *cursor;) {
            unsigned long lo, hi, offset;
            char perms[5], *line;
            if (!map_line(&cursor, &lo, &hi, perms, &offset, &line) || perms[0] != 'r' ||
                contains(line, "[vvar") || contains(line, "[vsyscall]"))
                continue;
            const unsigned char *m = (const unsigned char *)lo;
            for (unsigned long i = 0; i + (unsigned long)n <= hi - lo; i++) {
                long j = 0;
                while (j < n && (unsigned char)(m[i + j] ^ 0xA5) == needle[j]) j++;
                found += j == n;
            }
        }
    }
    if (fd >= 0) raw3(SYS_close, fd, 0, 0);
    if (got < 0) {
        say(1, "found -1\n");
        return;
    }
    say_number("found ", found);
}

/* Change one byte of this process's code as a debugger would: through /proc/self/mem, which
 * writes past the page protection (a process may always write its own memory there). The
 * code mapping is the one that holds this very function. */
static void poke(const char *args) {
    const char *q = args;
    long offset = hex_number(&q), mask = hex_number(&q);
    unsigned long here = (unsigned long)&poke, address = 0;
    unsigned char byte;
    int ok = 0;
    int maps_fd = offset >= 0 && mask > 0 ? open_maps() : -1;
    while (maps_fd >= 0 && next_maps(maps_fd) > 0) {
        for (char *cursor = maps; *cursor;) {
            unsigned long lo, hi, off;
            char perms[5], *line;
            if (map_line(&cursor, &lo, &hi, perms, &off, &line) && perms[2] == 'x' &&
                lo <= here && here < hi && off <= (unsigned long)offset &&
                (unsigned long)offset < off + (hi - lo))
                address = lo + ((unsigned long)offset - off);
        }
    }
    if (maps_fd >= 0) raw3(SYS_close, maps_fd, 0, 0);
    int fd = address ? (int)raw4(SYS_openat, AT_FDCWD, (long)"/proc/self/mem", O_RDWR, 0) : -1;
    if (fd >= 0) {
        if (raw4(SYS_pread64, fd, (long)&byte, 1, (long)address) == 1) {
            byte ^= (unsigned char)mask;
            ok = raw4(SYS_pwrite64, fd, (long)&byte, 1, (long)address) == 1;
        }
        raw3(SYS_close, fd, 0, 0);
    }
    say(1, ok ? "poked\n" : "poke failed\n");
}

/* A tracer attaches between two requests, as `gdb -p PID` would. The program makes itself
 * dumpable for that moment (a debugger with CAP_SYS_PTRACE needs no such help), then restores
 * what guard_harden set. The child (raw clone: it runs nothing but system calls) traces until
 * the program ends, and dies with it. */
static void attach(void) {
    int fds[2];
    char c = 'n';
    long was = raw3(SYS_prctl, PR_GET_DUMPABLE, 0, 0);
    long parent = raw3(SYS_getpid, 0, 0, 0);
    if (raw3(SYS_pipe2, (long)fds, 0, 0) != 0) goto out;
    raw3(SYS_prctl, PR_SET_DUMPABLE, 1, 0);
    raw3(SYS_prctl, PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0); /* Yama's ptrace_scope 1: a child may
                                                             * not trace its parent uninvited */
    long child = raw3(SYS_clone, SIGCHLD, 0, 0);
    if (child == 0) {
        raw3(SYS_close, fds[0], 0, 0);
        raw3(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0);
        c = raw4(SYS_ptrace, PTRACE_SEIZE, parent, 0, 0) == 0 ? 'y' : 'n';
        if (raw3(SYS_write, fds[1], (long)&c, 1) != 1 || c != 'y') raw3(SYS_exit_group, 1, 0, 0);
        for (;;) {
            int st = 0;
            if (raw4(SYS_wait4, parent, (long)&st, __WALL, 0) != parent || WIFEXITED(st) ||
                WIFSIGNALED(st))
                raw3(SYS_exit_group, 0, 0, 0);
            long sig = WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP && !(st >> 16) ? WSTOPSIG(st) : 0;
            raw4(SYS_ptrace, PTRACE_CONT, parent, 0, sig);
        }
    }
    raw3(SYS_close, fds[1], 0, 0);
    if (child < 0 || raw3(SYS_read, fds[0], (long)&c, 1) != 1) c = 'n';
    raw3(SYS_close, fds[0], 0, 0);
out:
    raw3(SYS_prctl, PR_SET_PTRACER, 0, 0);
    raw3(SYS_prctl, PR_SET_DUMPABLE, was, 0);
    say(1, c == 'y' ? "attached\n" : "attach failed\n");
}

static int starts_with(const char *line, const char *word) {
    while (*word && *line == *word) line++, word++;
    return !*word;
}

/* One line of stdin without its newline, read with raw system calls (a byte at a time: the
 * requests are short); 0 at the end of the input. */
static int read_line(char *line, long cap) {
    long n = 0;
    char c = 0;
    while (raw3(SYS_read, 0, (long)&c, 1) == 1) {
        if (c == '\n') break;
        if (n < cap - 1) line[n++] = c;
    }
    line[n] = 0;
    return n > 0 || c == '\n';
}

int main(int argc, char **argv) {
    int r = guard_harden();
    if (r == GUARD_TODO)
        fprintf(stderr, "KATA_TODO guard_harden (skipped)\n");
    else if (r != GUARD_OK)
        kata_refuse("harden"); /* a program that cannot protect its memory keeps no secret */
    if (argc == 3) return request(argv[1], argv[2]);
    if (argc != 2 || strcmp(argv[1], "--serve") != 0) {
        fprintf(stderr, "usage: %s INDEX CHALLENGE_HEX | %s --serve\n", argv[0], argv[0]);
        return 2;
    }
    char line[2 * CHALLENGE_MAX + 64];
    while (read_line(line, sizeof line)) {
        char *space = line;
        while (*space && *space != ' ') space++;
        if (starts_with(line, "probe")) {
            probe();
        } else if (starts_with(line, "scan ")) {
            scan(line + 5);
        } else if (starts_with(line, "poke ")) {
            poke(line + 5);
        } else if (starts_with(line, "attach")) {
            attach();
        } else if (*space == ' ' && space > line) {
            *space = 0;
            if (request(line, space + 1) != 0) return 2;
        } else {
            fprintf(stderr, "guard: bad request \"%s\"\n", line);
            return 2;
        }
    }
    return 0;
}
