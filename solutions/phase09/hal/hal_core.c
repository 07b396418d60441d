// hal_core.c: the HAL core (reference): discovery on KATA_HAL_PATH, dlopen with RTLD_LOCAL,
// the ABI checks, capability negotiation with stream emulation, priority order, fallback,
// handles, and the locks.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hal_backend.h"

// ------------------------------------------------------------------ status and errors
static const char* const kNames[HAL_STATUS_COUNT] = {
    "HAL_SUCCESS",           "HAL_ERROR_INVALID_VALUE",  "HAL_ERROR_NOT_INITIALIZED",
    "HAL_ERROR_NO_BACKEND",  "HAL_ERROR_OUT_OF_MEMORY",  "HAL_ERROR_INVALID_HANDLE",
    "HAL_ERROR_INVALID_DEVICE", "HAL_ERROR_NOT_SUPPORTED", "HAL_ERROR_NOT_FOUND",
    "HAL_ERROR_LAUNCH_FAILED", "HAL_ERROR_NOT_READY",    "HAL_ERROR_BACKEND_LOAD",
    "HAL_ERROR_ABI_MISMATCH", "HAL_ERROR_BACKEND_INIT",  "HAL_ERROR_BACKEND_CRASHED",
};
static const char* const kStrings[HAL_STATUS_COUNT] = {
    "no error",
    "an argument is invalid",
    "the HAL is not initialised: call hal_init first",
    "no backend on KATA_HAL_PATH loaded and initialised",
    "out of device memory",
    "the handle is not a live handle of the right kind",
    "no such device",
    "the device's backend does not support this operation",
    "no such module file or kernel",
    "the kernel launch failed",
    "the work recorded in the event has not finished yet",
    "a backend could not be loaded (dlopen, or no hal_backend_entry symbol)",
    "a backend speaks another ABI major version, or its table is too small",
    "a backend's init failed",
    "a backend crashed or hung in its init",
};

const char* hal_error_name(hal_status s) {
    if ((unsigned)s < HAL_STATUS_COUNT) return kNames[s];
    return "HAL_ERROR_UNKNOWN";
}

const char* hal_error_string(hal_status s) {
    if ((unsigned)s < HAL_STATUS_COUNT) return kStrings[s];
    return "unknown HAL status";
}

static __thread char t_last[512];

const char* hal_last_error(void) { return t_last; }

static hal_status fail(hal_status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static hal_status fail(hal_status s, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last, sizeof t_last, fmt, ap);
    va_end(ap);
    return s;
}

// ------------------------------------------------------------------ state
typedef struct {
    char path[512];
    void* handle;
    hal_backend_ops ops;   // the backend's table, copied; absent entries NULL
    int streams;           // native streams negotiated
    int memset_ok;
    int threadsafe;
    pthread_mutex_t lock;  // held around calls into a backend that is not thread-safe
    hal_backend_props info;
} backend_t;

typedef struct {
    int backend;
    int bdev;  // index inside the backend
    hal_device_props info;
} device_t;

enum { K_FREE = 0, K_MEM, K_MODULE, K_FUNCTION, K_STREAM, K_EVENT };

typedef struct {
    int kind;
    int dev;
    void* ptr;          // the backend's object
    size_t size;        // K_MEM: bytes
    uint64_t parent;    // K_FUNCTION: its module; K_EVENT: the stream of its last record
    int done;           // K_EVENT, emulated: always complete
} entry_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_ready;
static backend_t* g_backends;
static int g_nbackends;
static device_t* g_devices;
static int g_ndevices;
static entry_t* g_entries;   // g_entries[id - 1]; ids never reused, across inits too
static uint64_t g_nentries, g_capentries;


// Call into a backend with its lock when it is not thread-safe.
#define BCALL(b, expr)                                           \
    ({                                                           \
        if (!(b)->threadsafe) pthread_mutex_lock(&(b)->lock);    \
        __typeof__(expr) r_ = (expr);                            \
        if (!(b)->threadsafe) pthread_mutex_unlock(&(b)->lock);  \
        r_;                                                      \
    })
#define BCALL_VOID(b, expr)                                      \
    do {                                                         \
        if (!(b)->threadsafe) pthread_mutex_lock(&(b)->lock);    \
        expr;                                                    \
        if (!(b)->threadsafe) pthread_mutex_unlock(&(b)->lock);  \
    } while (0)

static uint64_t new_entry(int kind, int dev, void* ptr, size_t size, uint64_t parent) {
    if (g_nentries == g_capentries) {
        uint64_t cap = g_capentries ? g_capentries * 2 : 256;
        entry_t* e = realloc(g_entries, cap * sizeof *e);
        if (e == NULL) return 0;
        g_entries = e;
        g_capentries = cap;
    }
    entry_t* e = &g_entries[g_nentries++];
    e->kind = kind;
    e->dev = dev;
    e->ptr = ptr;
    e->size = size;
    e->parent = parent;
    e->done = 1;
    return g_nentries;
}

static entry_t* lookup(uint64_t id, int kind) {
    if (id == 0 || id > g_nentries) return NULL;
    entry_t* e = &g_entries[id - 1];
    return e->kind == kind ? e : NULL;
}

// ------------------------------------------------------------------ loading a backend

// dlopen + entry + the ABI checks (no init). 0 or a status, with the reason in msg.
static int open_backend(const char* path, backend_t* b, char* msg, size_t len) {
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    snprintf(b->info.path, sizeof b->info.path, "%s", path);
    b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (b->handle == NULL) {
        snprintf(msg, len, "%s: dlopen failed: %s", path, dlerror());
        return HAL_ERROR_BACKEND_LOAD;
    }
    hal_backend_entry_fn entry = (hal_backend_entry_fn)dlsym(b->handle, HAL_BACKEND_ENTRY);
    if (entry == NULL) {
        snprintf(msg, len, "%s: no symbol %s", path, HAL_BACKEND_ENTRY);
        return HAL_ERROR_BACKEND_LOAD;
    }
    const hal_backend_ops* t = entry(HAL_ABI_MAJOR, HAL_ABI_MINOR);
    if (t == NULL) {
        snprintf(msg, len, "%s: %s returned NULL (the backend refuses ABI %d.%d)", path,
                 HAL_BACKEND_ENTRY, HAL_ABI_MAJOR, HAL_ABI_MINOR);
        return HAL_ERROR_ABI_MISMATCH;
    }
    b->info.abi_major = t->abi_major;
    b->info.abi_minor = t->abi_minor;
    b->info.struct_size = t->struct_size;
    if (t->abi_major != HAL_ABI_MAJOR) {
        snprintf(msg, len, "%s: ABI major %u, but this core speaks major %d (%d.%d)", path,
                 (unsigned)t->abi_major, HAL_ABI_MAJOR, HAL_ABI_MAJOR, HAL_ABI_MINOR);
        return HAL_ERROR_ABI_MISMATCH;
    }
    if (t->struct_size < HAL_BACKEND_MIN_SIZE) {
        snprintf(msg, len, "%s: its table is %u bytes, smaller than the %zu bytes of ABI %d.0",
                 path, (unsigned)t->struct_size, (size_t)HAL_BACKEND_MIN_SIZE, HAL_ABI_MAJOR);
        return HAL_ERROR_ABI_MISMATCH;
    }
    size_t n = t->struct_size < sizeof b->ops ? t->struct_size : sizeof b->ops;
    n -= n % sizeof(void*);  // whole entries only: one that ends past struct_size is absent
    memcpy(&b->ops, t, n);
    // Entries past struct_size stay NULL (memset above); entries of a newer minor than the
    // backend's are not trusted either.
    if (t->abi_minor < 1) {
        b->ops.stream_create = NULL;
        b->ops.stream_destroy = NULL;
        b->ops.stream_synchronize = NULL;
        b->ops.event_create = NULL;
        b->ops.event_destroy = NULL;
        b->ops.event_record = NULL;
        b->ops.event_query = NULL;
    }
    if (t->abi_minor < 2) b->ops.memset = NULL;
    hal_backend_ops* o = &b->ops;
    b->streams = (o->caps & HAL_CAP_STREAMS) && o->stream_create && o->stream_destroy &&
                 o->stream_synchronize && o->event_create && o->event_destroy &&
                 o->event_record && o->event_query;
    b->memset_ok = (o->caps & HAL_CAP_MEMSET) && o->memset;
    b->threadsafe = (o->caps & HAL_CAP_THREADSAFE) != 0;
    snprintf(b->info.name, sizeof b->info.name, "%s", o->name ? o->name : "");
    b->info.priority = o->priority;
    o->name = NULL;  // the string lives in the backend: never read after dlclose
    return 0;
}

static int init_backend(backend_t* b, char* msg, size_t len) {
    if (b->ops.init != NULL) {
        int r = b->ops.init();
        if (r != HAL_SUCCESS) {
            snprintf(msg, len, "%s: init failed with %s", b->path, hal_error_name(r));
            return HAL_ERROR_BACKEND_INIT;
        }
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Open and init the backend in a child first: a crash or a hang there costs the child only.
static int probe_backend(const char* path, char* msg, size_t len) {
    int fds[2];
    if (pipe(fds) != 0) return 0;  // cannot probe: load directly
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        close(fds[0]);
        backend_t b;
        char m[256] = "";
        int r = open_backend(path, &b, m, sizeof m);
        if (r == 0) r = init_backend(&b, m, sizeof m);
        if (r != 0 && write(fds[1], m, strlen(m))) {
        }
        _exit(r);
    }
    close(fds[1]);
    double limit = 10.0;
    const char* env = getenv("KATA_HAL_PROBE_TIMEOUT_S");
    if (env != NULL && atof(env) > 0) limit = atof(env);
    double t0 = now_s();
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (now_s() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            close(fds[0]);
            snprintf(msg, len, "%s: init did not return within %.0f s (killed)", path, limit);
            return HAL_ERROR_BACKEND_CRASHED;
        }
        usleep(1000);
    }
    char m[256];
    ssize_t got = read(fds[0], m, sizeof m - 1);
    m[got > 0 ? got : 0] = 0;
    close(fds[0]);
    if (WIFSIGNALED(status)) {
        snprintf(msg, len, "%s: init crashed with signal %d (%s)", path, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
        return HAL_ERROR_BACKEND_CRASHED;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        snprintf(msg, len, "%s", m[0] ? m : "the backend failed in the probe");
        return WEXITSTATUS(status);
    }
    return 0;
}

static int candidate_cmp(const void* a, const void* b) {
    return strcmp(*(char* const*)a, *(char* const*)b);
}

static int is_backend_name(const char* n) {
    size_t l = strlen(n);
    return strncmp(n, "libhal_", 7) == 0 && l > 10 && strcmp(n + l - 3, ".so") == 0;
}

// Every libhal_*.so of every directory of KATA_HAL_PATH, in path order, names sorted in a
// directory; a file named on the path is a candidate itself; each real file once.
static char** discover(int* count) {
    *count = 0;
    const char* env = getenv("KATA_HAL_PATH");
    if (env == NULL || *env == 0) return NULL;
    char* copy = strdup(env);
    char** out = NULL;
    char** reals = NULL;
    int n = 0, cap = 0;
    for (char* save = NULL, *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char** names = NULL;
        int nn = 0, nc = 0;
        DIR* d = opendir(dir);
        if (d == NULL) {
            size_t l = strlen(dir);
            if (l > 3 && strcmp(dir + l - 3, ".so") == 0 && access(dir, R_OK) == 0) {
                names = malloc(sizeof *names);
                names[nn++] = strdup(dir);
            }
        } else {
            struct dirent* de;
            while ((de = readdir(d)) != NULL) {
                if (!is_backend_name(de->d_name)) continue;
                if (nn == nc) {
                    nc = nc ? nc * 2 : 8;
                    names = realloc(names, nc * sizeof *names);
                }
                size_t l = strlen(dir) + strlen(de->d_name) + 2;
                names[nn] = malloc(l);
                snprintf(names[nn++], l, "%s/%s", dir, de->d_name);
            }
            closedir(d);
            qsort(names, nn, sizeof *names, candidate_cmp);
        }
        for (int i = 0; i < nn; i++) {
            char real[PATH_MAX];
            if (realpath(names[i], real) == NULL) {
                free(names[i]);
                continue;
            }
            int dup = 0;
            for (int j = 0; j < n; j++) dup |= strcmp(reals[j], real) == 0;
            if (dup) {
                free(names[i]);
                continue;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                out = realloc(out, cap * sizeof *out);
                reals = realloc(reals, cap * sizeof *reals);
            }
            reals[n] = strdup(real);
            out[n++] = names[i];
        }
        free(names);
    }
    for (int j = 0; j < n; j++) free(reals[j]);
    free(reals);
    free(copy);
    *count = n;
    return out;
}

static int device_cmp(const void* pa, const void* pb) {
    const device_t* a = pa;
    const device_t* b = pb;
    if (a->info.priority != b->info.priority) return a->info.priority > b->info.priority ? -1 : 1;
    if (a->backend != b->backend) return a->backend < b->backend ? -1 : 1;
    return a->bdev < b->bdev ? -1 : a->bdev > b->bdev;
}

hal_status hal_init(void) {
    pthread_mutex_lock(&g_lock);
    if (g_ready) {
        pthread_mutex_unlock(&g_lock);
        return HAL_SUCCESS;
    }
    int n = 0;
    char** paths = discover(&n);
    g_backends = calloc(n ? n : 1, sizeof *g_backends);
    g_nbackends = 0;
    g_ndevices = 0;
    g_devices = NULL;
    int loaded = 0;
    char reasons[1024] = "";
    for (int i = 0; i < n; i++) {
        backend_t* b = &g_backends[g_nbackends++];
        char msg[256] = "";
        int r = probe_backend(paths[i], msg, sizeof msg);
        if (r == 0) r = open_backend(paths[i], b, msg, sizeof msg);
        if (r == 0) r = init_backend(b, msg, sizeof msg);
        if (r != 0) {
            hal_backend_props keep = b->info;
            if (b->handle != NULL) dlclose(b->handle);
            memset(b, 0, sizeof *b);
            b->info = keep;
            snprintf(b->info.path, sizeof b->info.path, "%s", paths[i]);
            b->info.status = r;
            snprintf(b->info.message, sizeof b->info.message, "%s", msg);
            size_t l = strlen(reasons);
            snprintf(reasons + l, sizeof reasons - l, "%s%s", l ? "; " : "", msg);
            continue;
        }
        pthread_mutex_init(&b->lock, NULL);
        int nd = b->ops.device_count ? b->ops.device_count() : 0;
        if (nd < 0) nd = 0;
        b->info.status = HAL_SUCCESS;
        b->info.ndevices = nd;
        loaded++;
        g_devices = realloc(g_devices, (g_ndevices + nd + 1) * sizeof *g_devices);
        for (int d = 0; d < nd; d++) {
            device_t* dv = &g_devices[g_ndevices++];
            memset(dv, 0, sizeof *dv);
            dv->backend = g_nbackends - 1;
            dv->bdev = d;
            if (b->ops.device_info) b->ops.device_info(d, &dv->info);
            snprintf(dv->info.backend, sizeof dv->info.backend, "%s", b->info.name);
            dv->info.priority = b->info.priority;
            dv->info.caps = (b->streams ? HAL_CAP_STREAMS : HAL_CAP_EMULATED_STREAMS) |
                            (b->memset_ok ? HAL_CAP_MEMSET : 0) |
                            (b->threadsafe ? HAL_CAP_THREADSAFE : 0);
            dv->info.backend_index = g_nbackends - 1;
            dv->info.backend_device = d;
        }
    }
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    if (loaded == 0) {
        free(g_devices);
        g_devices = NULL;
        g_ndevices = 0;
        // keep the backend records for hal_backend_info? Not initialised: drop them.
        free(g_backends);
        g_backends = NULL;
        g_nbackends = 0;
        pthread_mutex_unlock(&g_lock);
        if (n == 0) return fail(HAL_ERROR_NO_BACKEND, "hal_init: no libhal_*.so on KATA_HAL_PATH (%s)", getenv("KATA_HAL_PATH") ? getenv("KATA_HAL_PATH") : "unset");
        return fail(HAL_ERROR_NO_BACKEND, "hal_init: no backend loaded: %s", reasons);
    }
    qsort(g_devices, g_ndevices, sizeof *g_devices, device_cmp);
    g_ready = 1;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_shutdown(void) {
    pthread_mutex_lock(&g_lock);
    if (!g_ready) {
        pthread_mutex_unlock(&g_lock);
        return fail(HAL_ERROR_NOT_INITIALIZED, "hal_shutdown: the HAL is not initialised");
    }
    // Free what the application left, in reverse order of creation (functions before modules).
    for (uint64_t i = g_nentries; i-- > 0;) {
        entry_t* e = &g_entries[i];
        if (e->kind == K_FREE) continue;
        device_t* dv = &g_devices[e->dev];
        backend_t* b = &g_backends[dv->backend];
        hal_backend_ops* o = &b->ops;
        switch (e->kind) {
            case K_MEM: if (o->mem_free) o->mem_free(dv->bdev, e->ptr); break;
            case K_MODULE: if (o->module_unload) o->module_unload(dv->bdev, e->ptr); break;
            case K_STREAM: if (b->streams) o->stream_destroy(dv->bdev, e->ptr); break;
            case K_EVENT: if (b->streams) o->event_destroy(dv->bdev, e->ptr); break;
            default: break;
        }
        e->kind = K_FREE;
    }
    for (int i = 0; i < g_nbackends; i++) {
        backend_t* b = &g_backends[i];
        if (b->handle == NULL) continue;
        if (b->ops.shutdown) b->ops.shutdown();
        dlclose(b->handle);
        pthread_mutex_destroy(&b->lock);
    }
    free(g_backends);
    free(g_devices);
    g_backends = NULL;
    g_devices = NULL;
    g_nbackends = g_ndevices = 0;
    g_ready = 0;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

#define READY(fn)                                                                      \
    do {                                                                               \
        if (!g_ready) {                                                                \
            pthread_mutex_unlock(&g_lock);                                             \
            return fail(HAL_ERROR_NOT_INITIALIZED, "%s: call hal_init first", fn);      \
        }                                                                              \
    } while (0)
#define OUT(fn, cond, what)                                                             \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            pthread_mutex_unlock(&g_lock);                                             \
            return fail(HAL_ERROR_INVALID_VALUE, "%s: %s", fn, what);                  \
        }                                                                              \
    } while (0)
#define UNLOCK_FAIL(...)                  \
    do {                                  \
        pthread_mutex_unlock(&g_lock);    \
        return fail(__VA_ARGS__);         \
    } while (0)

hal_status hal_backend_count(int* count) {
    pthread_mutex_lock(&g_lock);
    READY("hal_backend_count");
    OUT("hal_backend_count", count != NULL, "count is NULL");
    *count = g_nbackends;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_backend_info(int index, hal_backend_props* info) {
    pthread_mutex_lock(&g_lock);
    READY("hal_backend_info");
    OUT("hal_backend_info", info != NULL, "info is NULL");
    OUT("hal_backend_info", index >= 0 && index < g_nbackends, "no backend with that index");
    *info = g_backends[index].info;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_device_count(int* count) {
    pthread_mutex_lock(&g_lock);
    READY("hal_device_count");
    OUT("hal_device_count", count != NULL, "count is NULL");
    *count = g_ndevices;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

#define DEVICE(fn, d)                                                                  \
    do {                                                                               \
        if ((d) < 0 || (d) >= g_ndevices)                                              \
            UNLOCK_FAIL(HAL_ERROR_INVALID_DEVICE, "%s: no device %d (%d devices)", fn, (d), g_ndevices); \
    } while (0)

hal_status hal_device_info(int device, hal_device_props* info) {
    pthread_mutex_lock(&g_lock);
    READY("hal_device_info");
    DEVICE("hal_device_info", device);
    OUT("hal_device_info", info != NULL, "info is NULL");
    *info = g_devices[device].info;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

// ------------------------------------------------------------------ memory
hal_status hal_mem_alloc(int device, size_t bytes, hal_mem* mem) {
    pthread_mutex_lock(&g_lock);
    READY("hal_mem_alloc");
    DEVICE("hal_mem_alloc", device);
    OUT("hal_mem_alloc", mem != NULL, "mem is NULL");
    OUT("hal_mem_alloc", bytes > 0, "bytes is 0");
    device_t* dv = &g_devices[device];
    backend_t* b = &g_backends[dv->backend];
    if (b->ops.mem_alloc == NULL) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_mem_alloc: backend %s has no mem_alloc", b->info.name);
    void* p = NULL;
    int bdev = dv->bdev;
    pthread_mutex_unlock(&g_lock);  // the backend is called without the core's lock
    int r = BCALL(b, b->ops.mem_alloc(bdev, bytes, &p));
    if (r != HAL_SUCCESS) return fail(r, "hal_mem_alloc: backend %s: %s", b->info.name, hal_error_name(r));
    pthread_mutex_lock(&g_lock);
    uint64_t id = new_entry(K_MEM, device, p, bytes, 0);
    if (id == 0) {
        BCALL(b, b->ops.mem_free(bdev, p));
        UNLOCK_FAIL(HAL_ERROR_OUT_OF_MEMORY, "hal_mem_alloc: out of host memory for the handle");
    }
    *mem = id;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_mem_free(hal_mem mem) {
    pthread_mutex_lock(&g_lock);
    READY("hal_mem_free");
    entry_t* e = lookup(mem, K_MEM);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_mem_free: %llu is not live memory", (unsigned long long)mem);
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    void* ptr = e->ptr;
    int bdev = dv->bdev;
    e->kind = K_FREE;  // no other thread finds it from now on
    pthread_mutex_unlock(&g_lock);
    int r = b->ops.mem_free ? BCALL(b, b->ops.mem_free(bdev, ptr)) : HAL_SUCCESS;
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_mem_free: backend: %s", hal_error_name(r));
}

hal_status hal_mem_size(hal_mem mem, size_t* bytes) {
    pthread_mutex_lock(&g_lock);
    READY("hal_mem_size");
    entry_t* e = lookup(mem, K_MEM);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_mem_size: %llu is not live memory", (unsigned long long)mem);
    OUT("hal_mem_size", bytes != NULL, "bytes is NULL");
    *bytes = e->size;
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

// Checks shared by the copies and memset; on success the lock is still held.
static hal_status range(const char* fn, hal_mem mem, size_t offset, size_t bytes, entry_t** out) {
    if (!g_ready) UNLOCK_FAIL(HAL_ERROR_NOT_INITIALIZED, "%s: call hal_init first", fn);
    entry_t* e = lookup(mem, K_MEM);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "%s: %llu is not live memory", fn, (unsigned long long)mem);
    if (offset > e->size || bytes > e->size - offset)
        UNLOCK_FAIL(HAL_ERROR_INVALID_VALUE, "%s: %zu bytes at offset %zu run past the end of a %zu-byte buffer", fn, bytes, offset, e->size);
    *out = e;
    return HAL_SUCCESS;
}

hal_status hal_memcpy_htod(hal_mem dst, size_t offset, const void* src, size_t bytes) {
    pthread_mutex_lock(&g_lock);
    entry_t* e;
    hal_status s = range("hal_memcpy_htod", dst, offset, bytes, &e);
    if (s != HAL_SUCCESS) return s;
    OUT("hal_memcpy_htod", src != NULL || bytes == 0, "src is NULL");
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    if (b->ops.memcpy_htod == NULL) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_memcpy_htod: backend %s has no memcpy_htod", b->info.name);
    char* at = (char*)e->ptr + offset;
    int bdev = dv->bdev;
    pthread_mutex_unlock(&g_lock);  // the backend is called without the core's lock
    int r = bytes == 0 ? HAL_SUCCESS : BCALL(b, b->ops.memcpy_htod(bdev, at, src, bytes));
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_memcpy_htod: backend: %s", hal_error_name(r));
}

hal_status hal_memcpy_dtoh(void* dst, hal_mem src, size_t offset, size_t bytes) {
    pthread_mutex_lock(&g_lock);
    entry_t* e;
    hal_status s = range("hal_memcpy_dtoh", src, offset, bytes, &e);
    if (s != HAL_SUCCESS) return s;
    OUT("hal_memcpy_dtoh", dst != NULL || bytes == 0, "dst is NULL");
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    if (b->ops.memcpy_dtoh == NULL) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_memcpy_dtoh: backend %s has no memcpy_dtoh", b->info.name);
    char* at = (char*)e->ptr + offset;
    int bdev = dv->bdev;
    pthread_mutex_unlock(&g_lock);  // the backend is called without the core's lock
    int r = bytes == 0 ? HAL_SUCCESS : BCALL(b, b->ops.memcpy_dtoh(bdev, dst, at, bytes));
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_memcpy_dtoh: backend: %s", hal_error_name(r));
}

hal_status hal_memset(hal_mem dst, size_t offset, int value, size_t bytes) {
    pthread_mutex_lock(&g_lock);
    entry_t* e;
    hal_status s = range("hal_memset", dst, offset, bytes, &e);
    if (s != HAL_SUCCESS) return s;
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    if (!b->memset_ok) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_memset: backend %s does not offer memset (ABI %u.%u)", b->info.name, b->info.abi_major, b->info.abi_minor);
    char* at = (char*)e->ptr + offset;
    int bdev = dv->bdev;
    pthread_mutex_unlock(&g_lock);  // the backend is called without the core's lock
    int r = bytes == 0 ? HAL_SUCCESS : BCALL(b, b->ops.memset(bdev, at, value, bytes));
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_memset: backend: %s", hal_error_name(r));
}

// ------------------------------------------------------------------ modules and kernels
hal_status hal_module_load(int device, const char* path, hal_module* module) {
    pthread_mutex_lock(&g_lock);
    READY("hal_module_load");
    DEVICE("hal_module_load", device);
    OUT("hal_module_load", path != NULL && module != NULL, "path or module is NULL");
    device_t* dv = &g_devices[device];
    backend_t* b = &g_backends[dv->backend];
    if (b->ops.module_load == NULL) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_module_load: backend %s has no module_load", b->info.name);
    void* m = NULL;
    int bdev = dv->bdev;
    pthread_mutex_unlock(&g_lock);
    int r = BCALL(b, b->ops.module_load(bdev, path, &m));
    if (r != HAL_SUCCESS) return fail(r, "hal_module_load: backend %s cannot load %s: %s", b->info.name, path, hal_error_name(r));
    pthread_mutex_lock(&g_lock);
    *module = new_entry(K_MODULE, device, m, 0, 0);
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_module_unload(hal_module module) {
    pthread_mutex_lock(&g_lock);
    READY("hal_module_unload");
    entry_t* e = lookup(module, K_MODULE);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_module_unload: %llu is not a loaded module", (unsigned long long)module);
    for (uint64_t i = 0; i < g_nentries; i++)
        if (g_entries[i].kind == K_FUNCTION && g_entries[i].parent == module) g_entries[i].kind = K_FREE;
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    void* ptr = e->ptr;
    int bdev = dv->bdev;
    e->kind = K_FREE;
    pthread_mutex_unlock(&g_lock);
    int r = b->ops.module_unload ? BCALL(b, b->ops.module_unload(bdev, ptr)) : HAL_SUCCESS;
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_module_unload: backend: %s", hal_error_name(r));
}

hal_status hal_module_function(hal_module module, const char* name, hal_function* function) {
    pthread_mutex_lock(&g_lock);
    READY("hal_module_function");
    entry_t* e = lookup(module, K_MODULE);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_module_function: %llu is not a loaded module", (unsigned long long)module);
    OUT("hal_module_function", name != NULL && function != NULL, "name or function is NULL");
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    if (b->ops.module_function == NULL) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_module_function: backend %s has no module_function", b->info.name);
    void* f = NULL;
    int dev = e->dev, bdev = dv->bdev;
    void* mptr = e->ptr;
    pthread_mutex_unlock(&g_lock);
    int r = BCALL(b, b->ops.module_function(bdev, mptr, name, &f));
    if (r != HAL_SUCCESS) return fail(r, "hal_module_function: no kernel %s: %s", name, hal_error_name(r));
    pthread_mutex_lock(&g_lock);
    *function = new_entry(K_FUNCTION, dev, f, 0, module);
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

#define MAX_ARGS 64

hal_status hal_launch(hal_function function, hal_dim3 grid, hal_dim3 block, const hal_arg* args,
                      int nargs, hal_stream stream) {
    pthread_mutex_lock(&g_lock);
    READY("hal_launch");
    entry_t* f = lookup(function, K_FUNCTION);
    if (f == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_launch: %llu is not a live function", (unsigned long long)function);
    OUT("hal_launch", grid.x && grid.y && grid.z && block.x && block.y && block.z, "a grid or block dimension is 0");
    OUT("hal_launch", nargs >= 0 && nargs <= MAX_ARGS, "nargs out of 0..64");
    OUT("hal_launch", nargs == 0 || args != NULL, "args is NULL");
    device_t* dv = &g_devices[f->dev];
    backend_t* b = &g_backends[dv->backend];
    void* sptr = NULL;
    if (stream != 0) {
        entry_t* s = lookup(stream, K_STREAM);
        if (s == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_launch: %llu is not a live stream", (unsigned long long)stream);
        if (s->dev != f->dev) UNLOCK_FAIL(HAL_ERROR_INVALID_VALUE, "hal_launch: the stream is on device %d, the kernel on device %d", s->dev, f->dev);
        sptr = b->streams ? s->ptr : NULL;  // emulated: run it now, in order
    }
    union { void* p; uint64_t v; } slots[MAX_ARGS];
    void* params[MAX_ARGS];
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == HAL_ARG_MEM) {
            entry_t* m = lookup(args[i].value, K_MEM);
            if (m == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_launch: argument %d: %llu is not live memory", i, (unsigned long long)args[i].value);
            if (m->dev != f->dev) UNLOCK_FAIL(HAL_ERROR_INVALID_VALUE, "hal_launch: argument %d is memory of device %d, the kernel runs on device %d", i, m->dev, f->dev);
            slots[i].p = m->ptr;
        } else if (args[i].kind == HAL_ARG_VALUE) {
            uint32_t sz = args[i].size;
            if (sz != 1 && sz != 2 && sz != 4 && sz != 8) UNLOCK_FAIL(HAL_ERROR_INVALID_VALUE, "hal_launch: argument %d has size %u (1, 2, 4 or 8)", i, sz);
            slots[i].v = args[i].value;
        } else {
            UNLOCK_FAIL(HAL_ERROR_INVALID_VALUE, "hal_launch: argument %d has kind %u", i, args[i].kind);
        }
        params[i] = &slots[i];
    }
    if (b->ops.launch == NULL) UNLOCK_FAIL(HAL_ERROR_NOT_SUPPORTED, "hal_launch: backend %s has no launch", b->info.name);
    void* fptr = f->ptr;
    int bdev = dv->bdev;
    pthread_mutex_unlock(&g_lock);  // the backend is called without the core's lock
    int r = BCALL(b, b->ops.launch(bdev, fptr, grid, block, params, nargs, sptr));
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_launch: backend %s: %s", b->info.name, hal_error_name(r));
}

// ------------------------------------------------------------------ streams and events
hal_status hal_stream_create(int device, hal_stream* stream) {
    pthread_mutex_lock(&g_lock);
    READY("hal_stream_create");
    DEVICE("hal_stream_create", device);
    OUT("hal_stream_create", stream != NULL, "stream is NULL");
    device_t* dv = &g_devices[device];
    backend_t* b = &g_backends[dv->backend];
    void* s = NULL;
    if (b->streams) {
        int r = BCALL(b, b->ops.stream_create(dv->bdev, &s));
        if (r != HAL_SUCCESS) UNLOCK_FAIL(r, "hal_stream_create: backend %s: %s", b->info.name, hal_error_name(r));
    }
    *stream = new_entry(K_STREAM, device, s, 0, 0);
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_stream_destroy(hal_stream stream) {
    pthread_mutex_lock(&g_lock);
    READY("hal_stream_destroy");
    entry_t* e = lookup(stream, K_STREAM);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_stream_destroy: %llu is not a live stream", (unsigned long long)stream);
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    int r = HAL_SUCCESS;
    if (b->streams) {
        r = BCALL(b, b->ops.stream_synchronize(dv->bdev, e->ptr));
        int r2 = BCALL(b, b->ops.stream_destroy(dv->bdev, e->ptr));
        if (r == HAL_SUCCESS) r = r2;
    }
    e->kind = K_FREE;
    pthread_mutex_unlock(&g_lock);
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_stream_destroy: backend: %s", hal_error_name(r));
}

hal_status hal_stream_synchronize(hal_stream stream) {
    pthread_mutex_lock(&g_lock);
    READY("hal_stream_synchronize");
    int r = HAL_SUCCESS;
    if (stream == 0) {
        for (uint64_t i = 0; i < g_nentries; i++) {
            entry_t* e = &g_entries[i];
            if (e->kind != K_STREAM) continue;
            device_t* dv = &g_devices[e->dev];
            backend_t* b = &g_backends[dv->backend];
            if (!b->streams) continue;
            int ri = BCALL(b, b->ops.stream_synchronize(dv->bdev, e->ptr));
            if (r == HAL_SUCCESS) r = ri;
        }
    } else {
        entry_t* e = lookup(stream, K_STREAM);
        if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_stream_synchronize: %llu is not a live stream", (unsigned long long)stream);
        device_t* dv = &g_devices[e->dev];
        backend_t* b = &g_backends[dv->backend];
        if (b->streams) r = BCALL(b, b->ops.stream_synchronize(dv->bdev, e->ptr));
    }
    pthread_mutex_unlock(&g_lock);
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_stream_synchronize: backend: %s", hal_error_name(r));
}

hal_status hal_event_create(int device, hal_event* event) {
    pthread_mutex_lock(&g_lock);
    READY("hal_event_create");
    DEVICE("hal_event_create", device);
    OUT("hal_event_create", event != NULL, "event is NULL");
    device_t* dv = &g_devices[device];
    backend_t* b = &g_backends[dv->backend];
    void* p = NULL;
    if (b->streams) {
        int r = BCALL(b, b->ops.event_create(dv->bdev, &p));
        if (r != HAL_SUCCESS) UNLOCK_FAIL(r, "hal_event_create: backend %s: %s", b->info.name, hal_error_name(r));
    }
    *event = new_entry(K_EVENT, device, p, 0, 0);
    pthread_mutex_unlock(&g_lock);
    return HAL_SUCCESS;
}

hal_status hal_event_destroy(hal_event event) {
    pthread_mutex_lock(&g_lock);
    READY("hal_event_destroy");
    entry_t* e = lookup(event, K_EVENT);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_event_destroy: %llu is not a live event", (unsigned long long)event);
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    int r = b->streams ? BCALL(b, b->ops.event_destroy(dv->bdev, e->ptr)) : HAL_SUCCESS;
    e->kind = K_FREE;
    pthread_mutex_unlock(&g_lock);
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_event_destroy: backend: %s", hal_error_name(r));
}

hal_status hal_event_record(hal_event event, hal_stream stream) {
    pthread_mutex_lock(&g_lock);
    READY("hal_event_record");
    entry_t* e = lookup(event, K_EVENT);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_event_record: %llu is not a live event", (unsigned long long)event);
    void* sptr = NULL;
    if (stream != 0) {
        entry_t* s = lookup(stream, K_STREAM);
        if (s == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_event_record: %llu is not a live stream", (unsigned long long)stream);
        if (s->dev != e->dev) UNLOCK_FAIL(HAL_ERROR_INVALID_VALUE, "hal_event_record: the event is on device %d, the stream on device %d", e->dev, s->dev);
        sptr = s->ptr;
    }
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    int r = HAL_SUCCESS;
    if (b->streams) r = BCALL(b, b->ops.event_record(dv->bdev, e->ptr, sptr));
    e->parent = stream;
    e->done = 1;  // emulated streams ran the work already
    pthread_mutex_unlock(&g_lock);
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_event_record: backend: %s", hal_error_name(r));
}

hal_status hal_event_query(hal_event event) {
    pthread_mutex_lock(&g_lock);
    READY("hal_event_query");
    entry_t* e = lookup(event, K_EVENT);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_event_query: %llu is not a live event", (unsigned long long)event);
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    int r = b->streams ? BCALL(b, b->ops.event_query(dv->bdev, e->ptr)) : HAL_SUCCESS;
    pthread_mutex_unlock(&g_lock);
    if (r == HAL_SUCCESS || r == HAL_ERROR_NOT_READY) return r;
    return fail(r, "hal_event_query: backend: %s", hal_error_name(r));
}

hal_status hal_event_synchronize(hal_event event) {
    pthread_mutex_lock(&g_lock);
    READY("hal_event_synchronize");
    entry_t* e = lookup(event, K_EVENT);
    if (e == NULL) UNLOCK_FAIL(HAL_ERROR_INVALID_HANDLE, "hal_event_synchronize: %llu is not a live event", (unsigned long long)event);
    device_t* dv = &g_devices[e->dev];
    backend_t* b = &g_backends[dv->backend];
    int r = HAL_SUCCESS;
    if (b->streams && e->parent != 0) {
        entry_t* s = lookup(e->parent, K_STREAM);
        if (s != NULL) r = BCALL(b, b->ops.stream_synchronize(dv->bdev, s->ptr));
    }
    pthread_mutex_unlock(&g_lock);
    return r == HAL_SUCCESS ? HAL_SUCCESS : fail(r, "hal_event_synchronize: backend: %s", hal_error_name(r));
}
