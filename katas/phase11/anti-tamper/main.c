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

static void todo(const char *function) {
    fprintf(stderr, "KATA_TODO %s\n", function);
    fflush(stderr);
    _exit(99);
}

static volatile int refusing;

/* exit() runs this; guard_fail must end the process without it (_exit). */
static void after_refusal(void) {
    if (refusing) fprintf(stderr, "main.c: atexit handlers ran after the refusal\n");
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
    int n = guard_secret(index, digest, key, sizeof key);
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

static int unhex(const char *s, unsigned char *out, size_t cap) {
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
    if (n % 2 || n / 2 > cap) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (unsigned char)v;
    }
    return (int)(n / 2);
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

static void probe(void) {
    struct rlimit core = {0, 0};
    long dumpable = raw3(SYS_prctl, PR_GET_DUMPABLE, 0, 0);
    long r = raw4(SYS_prlimit64, 0, RLIMIT_CORE, 0, (long)&core);
    printf("dumpable=%ld core=%lld\n", dumpable, r == 0 ? (long long)core.rlim_cur : -1LL);
    fflush(stdout);
}

static char maps[1 << 16];

/* How many places of readable memory hold needle (given XOR 0xA5). */
static void scan(const char *hex) {
    unsigned char needle[GUARD_SECRET_MAX];
    int n = unhex(hex, needle, sizeof needle);
    long found = 0, got = 0, r;
    int fd = (int)raw4(SYS_openat, AT_FDCWD, (long)"/proc/self/maps", O_RDONLY, 0);
    if (n <= 0 || fd < 0) {
        printf("found -1\n");
        fflush(stdout);
        return;
    }
    while ((r = raw3(SYS_read, fd, (long)(maps + got), (long)sizeof maps - 1 - got)) > 0) got += r;
    raw3(SYS_close, fd, 0, 0);
    maps[got] = 0;
    for (char *line = maps; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = 0;
        unsigned long lo, hi;
        char perms[5] = "";
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && perms[0] == 'r' &&
            !strstr(line, "[vvar") && !strstr(line, "[vsyscall]")) {
            const unsigned char *m = (const unsigned char *)lo;
            for (unsigned long i = 0; i + (unsigned long)n <= hi - lo; i++) {
                int j = 0;
                while (j < n && (unsigned char)(m[i + j] ^ 0xA5) == needle[j]) j++;
                found += j == n;
            }
        }
        line = next;
    }
    printf("found %ld\n", found);
    fflush(stdout);
}

struct poke_at {
    unsigned long offset;
    unsigned long address;
};

static int find_offset(struct dl_phdr_info *info, size_t size, void *data) {
    struct poke_at *at = data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_offset <= at->offset &&
            at->offset < ph->p_offset + ph->p_filesz)
            at->address = info->dlpi_addr + ph->p_vaddr + (at->offset - ph->p_offset);
    }
    return 1;
}

/* Change one byte of this process's code as a debugger would: through /proc/self/mem, which
 * writes past the page protection (a process may always write its own memory there). */
static void poke(const char *args) {
    struct poke_at at = {0, 0};
    unsigned mask = 0;
    unsigned char byte;
    int ok = 0;
    if (sscanf(args, "%lx %x", &at.offset, &mask) == 2) dl_iterate_phdr(find_offset, &at);
    int fd = at.address ? (int)raw4(SYS_openat, AT_FDCWD, (long)"/proc/self/mem", O_RDWR, 0) : -1;
    if (fd >= 0) {
        if (raw4(SYS_pread64, fd, (long)&byte, 1, (long)at.address) == 1) {
            byte ^= (unsigned char)mask;
            ok = raw4(SYS_pwrite64, fd, (long)&byte, 1, (long)at.address) == 1;
        }
        raw3(SYS_close, fd, 0, 0);
    }
    printf(ok ? "poked\n" : "poke failed\n");
    fflush(stdout);
}

/* A tracer attaches between two requests, as `gdb -p PID` would. The program makes itself
 * dumpable for that moment (a debugger with CAP_SYS_PTRACE needs no such help), then restores
 * what guard_harden set. The child traces until the program ends, and dies with it. */
static void attach(void) {
    int fds[2];
    char c = 'n';
    long was = raw3(SYS_prctl, PR_GET_DUMPABLE, 0, 0);
    pid_t parent = getpid();
    if (pipe(fds) != 0) goto out;
    raw3(SYS_prctl, PR_SET_DUMPABLE, 1, 0);
    pid_t child = fork();
    if (child == 0) {
        close(fds[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        c = ptrace(PTRACE_SEIZE, parent, 0, 0) == 0 ? 'y' : 'n';
        if (write(fds[1], &c, 1) != 1 || c != 'y') _exit(1);
        for (;;) {
            int st;
            if (waitpid(parent, &st, __WALL) != parent || WIFEXITED(st) || WIFSIGNALED(st))
                _exit(0);
            int sig = WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP && !(st >> 16) ? WSTOPSIG(st) : 0;
            ptrace(PTRACE_CONT, parent, 0, (void *)(long)sig);
        }
    }
    close(fds[1]);
    if (child < 0 || read(fds[0], &c, 1) != 1) c = 'n';
    close(fds[0]);
out:
    raw3(SYS_prctl, PR_SET_DUMPABLE, was, 0);
    printf(c == 'y' ? "attached\n" : "attach failed\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    atexit(after_refusal);
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
    while (fgets(line, sizeof line, stdin)) {
        char a[32], b[2 * CHALLENGE_MAX + 8];
        if (strncmp(line, "probe", 5) == 0) {
            probe();
        } else if (sscanf(line, "scan %140s", b) == 1) {
            scan(b);
        } else if (strncmp(line, "poke ", 5) == 0) {
            poke(line + 5);
        } else if (strncmp(line, "attach", 6) == 0) {
            attach();
        } else if (sscanf(line, "%31s %520s", a, b) == 2) {
            if (request(a, b) != 0) return 2;
        } else {
            fprintf(stderr, "guard: bad request \"%s\"\n", line);
            return 2;
        }
    }
    return 0;
}
