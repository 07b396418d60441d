// probe_backend.c: a test backend whose table is whatever its config file says (GIVEN).
//
// The tests build it once and copy it under several names (libhal_<x>.so); each copy reads
// <its own path>.conf, lines of key=value:
//   name=probe  priority=0  caps=0  major=1  minor=2  size=<struct_size, default: that of minor>
//   devices=1  init=ok|fail|crash|hang  init_ms=0  entry=ok|null  null=launch,memset,...
//   dwell_us=0  guard=0|1  log=/path/to/log
// Table slots the core must not read (past `size`, or of a minor newer than `minor`) hold
// TRIPWIRES: a call there logs "tripwire <slot>" and answers HAL_ERROR_LAUNCH_FAILED. Every
// real call logs "<pid> <name> call <entry>"; a call that overlaps another call into the same
// backend logs "concurrent <entry> while <the entry entered before it>" (the core must
// serialise a backend without HAL_CAP_THREADSAFE). A copy or memset outside its allocation logs "oob <entry>". Every call
// looks for hal_probe_marker in the process's global namespace and logs "global" when it is
// there (the backend was loaded, or later promoted, RTLD_GLOBAL). shutdown logs what is still
// live ("left mem=0 streams=0 events=0 modules=0": the core frees what the application left).
// guard=1 puts the table's bytes past the entries of minor 2 (sizeof(hal_backend_ops)) on a page
// of their own that the core must never read: a read there logs "readpast <offset>" and goes on
// (the page becomes readable), so a core that copies a newer, larger table whole is seen even
// where the copy does not crash it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal_backend.h"

HAL_BACKEND_EXPORT int hal_probe_marker = 1;  // in the global scope: loaded RTLD_GLOBAL

static struct {
    char name[32];
    int priority, caps, major, minor, size, devices, entry_null, dwell_us, init_ms, guard;
    char init[16];
    char null[512];
    char log[512];
} C;

static volatile int g_inside;

static void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char* fmt, ...) {
    if (!C.log[0]) return;
    char line[600];
    int n = snprintf(line, sizeof line, "%d %s ", (int)getpid(), C.name);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = sizeof line - 2;
    line[n++] = '\n';
    int fd = open(C.log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        if (write(fd, line, n)) {
        }
        close(fd);
    }
}

static int g_live_streams, g_live_events, g_live_modules;
static const char* volatile g_in_what;  // the entry last entered (for the overlap's message)

static void enter(const char* what) {
    logf_("call %s", what);
    void* self = dlopen(NULL, RTLD_NOW);  // the program's handle: the global scope only
    if (self != NULL && dlsym(self, "hal_probe_marker") != NULL) logf_("global");
    const char* other = g_in_what;
    if (__sync_add_and_fetch(&g_inside, 1) > 1) logf_("concurrent %s while %s", what, other ? other : "?");
    g_in_what = what;
    if (C.dwell_us > 0) usleep(C.dwell_us);
}
static void leave(void) { __sync_sub_and_fetch(&g_inside, 1); }

// ------------------------------------------------------------------ memory, with bounds
#define MAXA 4096
static struct { char* p; size_t n; } g_allocs[MAXA];

static int in_bounds(const char* p, size_t n) {
    for (int i = 0; i < MAXA; i++)
        if (g_allocs[i].p && p >= g_allocs[i].p && n <= g_allocs[i].n && p + n <= g_allocs[i].p + g_allocs[i].n)
            return 1;
    return 0;
}

static int p_init(void) {
    enter("init");
    int r = HAL_SUCCESS;
    if (strcmp(C.init, "fail") == 0) r = HAL_ERROR_OUT_OF_MEMORY;
    if (strcmp(C.init, "crash") == 0) {
        logf_("crashing");
        raise(SIGSEGV);
    }
    if (strcmp(C.init, "hang") == 0) sleep(3600);
    if (C.init_ms > 0) usleep((useconds_t)C.init_ms * 1000);
    leave();
    return r;
}
static void p_shutdown(void) {
    enter("shutdown");
    int mem = 0;
    for (int i = 0; i < MAXA; i++) mem += g_allocs[i].p != NULL;
    logf_("left mem=%d streams=%d events=%d modules=%d", mem, g_live_streams, g_live_events,
          g_live_modules);
    leave();
}
static int p_device_count(void) { enter("device_count"); leave(); return C.devices; }
static int p_device_info(int dev, hal_device_props* info) {
    enter("device_info");
    snprintf(info->name, sizeof info->name, "%s device %d", C.name, dev);
    info->total_mem = 1u << 30;
    leave();
    return HAL_SUCCESS;
}
static int p_mem_alloc(int dev, size_t bytes, void** ptr) {
    (void)dev;
    enter("mem_alloc");
    char* p = calloc(1, bytes);
    int r = p ? HAL_SUCCESS : HAL_ERROR_OUT_OF_MEMORY;
    for (int i = 0; p && i < MAXA; i++)
        if (!g_allocs[i].p) {
            g_allocs[i].p = p;
            g_allocs[i].n = bytes;
            break;
        }
    *ptr = p;
    leave();
    return r;
}
static int p_mem_free(int dev, void* ptr) {
    (void)dev;
    enter("mem_free");
    int found = 0;
    for (int i = 0; i < MAXA; i++)
        if (g_allocs[i].p == ptr) {
            g_allocs[i].p = NULL;
            found = 1;
        }
    if (!found) logf_("badfree mem_free");
    else free(ptr);
    leave();
    return HAL_SUCCESS;
}
static int p_htod(int dev, void* dst, const void* src, size_t n) {
    (void)dev;
    enter("memcpy_htod");
    if (!in_bounds(dst, n)) logf_("oob memcpy_htod");
    else memcpy(dst, src, n);
    leave();
    return HAL_SUCCESS;
}
static int p_dtoh(int dev, void* dst, const void* src, size_t n) {
    (void)dev;
    enter("memcpy_dtoh");
    if (!in_bounds(src, n)) logf_("oob memcpy_dtoh");
    else memcpy(dst, src, n);
    leave();
    return HAL_SUCCESS;
}
static int p_memset(int dev, void* dst, int v, size_t n) {
    (void)dev;
    enter("memset");
    if (!in_bounds(dst, n)) logf_("oob memset");
    else memset(dst, v, n);
    leave();
    return HAL_SUCCESS;
}
static int p_module_load(int dev, const char* path, void** m) {
    (void)dev;
    enter("module_load");
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) __sync_add_and_fetch(&g_live_modules, 1);
    leave();
    if (!h) return HAL_ERROR_NOT_FOUND;
    *m = h;
    return HAL_SUCCESS;
}
static int p_module_unload(int dev, void* m) {
    (void)dev;
    enter("module_unload");
    dlclose(m);
    __sync_sub_and_fetch(&g_live_modules, 1);
    leave();
    return HAL_SUCCESS;
}
static int p_module_function(int dev, void* m, const char* name, void** f) {
    (void)dev;
    enter("module_function");
    void* s = dlsym(m, name);
    leave();
    if (!s) return HAL_ERROR_NOT_FOUND;
    *f = s;
    return HAL_SUCCESS;
}
static int p_launch(int dev, void* fn, hal_dim3 g, hal_dim3 b, void** params, int np, void* stream) {
    (void)dev, (void)np;
    enter(stream ? "launch_stream" : "launch");
    hal_cpu_thread t;
    t.grid_dim = g;
    t.block_dim = b;
    for (t.block_idx.z = 0; t.block_idx.z < g.z; t.block_idx.z++)
        for (t.block_idx.y = 0; t.block_idx.y < g.y; t.block_idx.y++)
            for (t.block_idx.x = 0; t.block_idx.x < g.x; t.block_idx.x++)
                for (t.thread_idx.z = 0; t.thread_idx.z < b.z; t.thread_idx.z++)
                    for (t.thread_idx.y = 0; t.thread_idx.y < b.y; t.thread_idx.y++)
                        for (t.thread_idx.x = 0; t.thread_idx.x < b.x; t.thread_idx.x++)
                            ((hal_cpu_kernel)fn)(&t, params);
    leave();
    return HAL_SUCCESS;
}
// Native streams: work runs at once (in order), but every call is logged.
static int p_stream_create(int dev, void** s) { (void)dev; enter("stream_create"); *s = malloc(8); __sync_add_and_fetch(&g_live_streams, 1); leave(); return HAL_SUCCESS; }
static int p_stream_destroy(int dev, void* s) { (void)dev; enter("stream_destroy"); free(s); __sync_sub_and_fetch(&g_live_streams, 1); leave(); return HAL_SUCCESS; }
static int p_stream_sync(int dev, void* s) { (void)dev, (void)s; enter("stream_synchronize"); leave(); return HAL_SUCCESS; }
static int p_event_create(int dev, void** e) { (void)dev; enter("event_create"); *e = malloc(8); __sync_add_and_fetch(&g_live_events, 1); leave(); return HAL_SUCCESS; }
static int p_event_destroy(int dev, void* e) { (void)dev; enter("event_destroy"); free(e); __sync_sub_and_fetch(&g_live_events, 1); leave(); return HAL_SUCCESS; }
static int p_event_record(int dev, void* e, void* s) { (void)dev, (void)e, (void)s; enter("event_record"); leave(); return HAL_SUCCESS; }
static int p_event_query(int dev, void* e) { (void)dev, (void)e; enter("event_query"); leave(); return HAL_SUCCESS; }

// ------------------------------------------------------------------ the table
#define NSLOTS 40
#define TRIP(i) static int trip##i(void) { logf_("tripwire %d", i); return HAL_ERROR_LAUNCH_FAILED; }
TRIP(0) TRIP(1) TRIP(2) TRIP(3) TRIP(4) TRIP(5) TRIP(6) TRIP(7) TRIP(8) TRIP(9)
TRIP(10) TRIP(11) TRIP(12) TRIP(13) TRIP(14) TRIP(15) TRIP(16) TRIP(17) TRIP(18) TRIP(19)
TRIP(20) TRIP(21) TRIP(22) TRIP(23) TRIP(24) TRIP(25) TRIP(26) TRIP(27) TRIP(28) TRIP(29)
TRIP(30) TRIP(31) TRIP(32) TRIP(33) TRIP(34) TRIP(35) TRIP(36) TRIP(37) TRIP(38) TRIP(39)
static int (*const kTrips[NSLOTS])(void) = {
    trip0, trip1, trip2, trip3, trip4, trip5, trip6, trip7, trip8, trip9,
    trip10, trip11, trip12, trip13, trip14, trip15, trip16, trip17, trip18, trip19,
    trip20, trip21, trip22, trip23, trip24, trip25, trip26, trip27, trip28, trip29,
    trip30, trip31, trip32, trip33, trip34, trip35, trip36, trip37, trip38, trip39,
};

struct entry_def { const char* name; size_t offset; int minor; void* fn; };
#define E(n, m, f) {#n, offsetof(hal_backend_ops, n), m, (void*)(f)}
static const struct entry_def kEntries[] = {
    E(init, 0, p_init), E(shutdown, 0, p_shutdown), E(device_count, 0, p_device_count),
    E(device_info, 0, p_device_info), E(mem_alloc, 0, p_mem_alloc), E(mem_free, 0, p_mem_free),
    E(memcpy_htod, 0, p_htod), E(memcpy_dtoh, 0, p_dtoh), E(module_load, 0, p_module_load),
    E(module_unload, 0, p_module_unload), E(module_function, 0, p_module_function),
    E(launch, 0, p_launch), E(stream_create, 1, p_stream_create),
    E(stream_destroy, 1, p_stream_destroy), E(stream_synchronize, 1, p_stream_sync),
    E(event_create, 1, p_event_create), E(event_destroy, 1, p_event_destroy),
    E(event_record, 1, p_event_record), E(event_query, 1, p_event_query),
    E(memset, 2, p_memset),
};
#define NENTRIES (sizeof kEntries / sizeof kEntries[0])

static union {
    hal_backend_ops ops;
    void* slots[NSLOTS];
} g_table;

static void read_config(void) {
    memset(&C, 0, sizeof C);
    snprintf(C.name, sizeof C.name, "probe");
    C.major = HAL_ABI_MAJOR;
    C.minor = HAL_ABI_MINOR;
    C.size = -1;
    C.devices = 1;
    snprintf(C.init, sizeof C.init, "ok");
    Dl_info info;
    if (!dladdr((void*)&read_config, &info) || info.dli_fname == NULL) return;
    char path[600];
    snprintf(path, sizeof path, "%s.conf", info.dli_fname);
    FILE* f = fopen(path, "r");
    if (f == NULL) return;
    char line[700];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char* eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = line, *v = eq + 1;
        if (!strcmp(k, "name")) snprintf(C.name, sizeof C.name, "%s", v);
        else if (!strcmp(k, "priority")) C.priority = atoi(v);
        else if (!strcmp(k, "caps")) C.caps = atoi(v);
        else if (!strcmp(k, "major")) C.major = atoi(v);
        else if (!strcmp(k, "minor")) C.minor = atoi(v);
        else if (!strcmp(k, "size")) C.size = atoi(v);
        else if (!strcmp(k, "devices")) C.devices = atoi(v);
        else if (!strcmp(k, "init")) snprintf(C.init, sizeof C.init, "%s", v);
        else if (!strcmp(k, "entry")) C.entry_null = !strcmp(v, "null");
        else if (!strcmp(k, "null")) snprintf(C.null, sizeof C.null, ",%s,", v);
        else if (!strcmp(k, "log")) snprintf(C.log, sizeof C.log, "%s", v);
        else if (!strcmp(k, "dwell_us")) C.dwell_us = atoi(v);
        else if (!strcmp(k, "init_ms")) C.init_ms = atoi(v);
        else if (!strcmp(k, "guard")) C.guard = atoi(v);
    }
    fclose(f);
}

static size_t size_of_minor(int minor) {
    if (minor <= 0) return HAL_BACKEND_SIZE_MINOR0;
    if (minor == 1) return HAL_BACKEND_SIZE_MINOR1;
    return HAL_BACKEND_SIZE_MINOR2;
}

// guard=1: the table copied so that sizeof(hal_backend_ops) ends exactly at a page boundary; the
// page after it (the slots of minors the core does not know) is PROT_NONE until read.
static char* g_guard_page;
static size_t g_page_size;
static struct sigaction g_prev_segv;

static void on_segv(int sig, siginfo_t* si, void* uc) {
    (void)sig, (void)uc;
    char* a = (char*)si->si_addr;
    if (g_guard_page != NULL && a >= g_guard_page && a < g_guard_page + g_page_size) {
        logf_("readpast %ld", (long)(a - g_guard_page) + (long)sizeof(hal_backend_ops));
        mprotect(g_guard_page, g_page_size, PROT_READ | PROT_WRITE);  // the read goes on
        return;
    }
    // Not ours: the previous handler (or the default action) gets the fault when it recurs.
    sigaction(SIGSEGV, &g_prev_segv, NULL);
}

static const hal_backend_ops* guarded(void) {
    if (g_guard_page == NULL) {
        g_page_size = (size_t)sysconf(_SC_PAGESIZE);
        char* m = mmap(NULL, 2 * g_page_size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return &g_table.ops;
        g_guard_page = m + g_page_size;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(SIGSEGV, &sa, &g_prev_segv);
    }
    mprotect(g_guard_page, g_page_size, PROT_READ | PROT_WRITE);
    char* t = g_guard_page - sizeof(hal_backend_ops);
    memcpy(t, &g_table, sizeof g_table);
    mprotect(g_guard_page, g_page_size, PROT_NONE);
    return (const hal_backend_ops*)t;
}

HAL_BACKEND_EXPORT const hal_backend_ops* hal_backend_entry(uint32_t core_major, uint32_t core_minor) {
    read_config();
    logf_("entry %u.%u", core_major, core_minor);
    if (C.entry_null) return NULL;
    size_t size = C.size >= 0 ? (size_t)C.size : size_of_minor(C.minor);
    for (int i = 0; i < NSLOTS; i++) g_table.slots[i] = (void*)kTrips[i];
    g_table.ops.struct_size = (uint32_t)size;
    g_table.ops.abi_major = (uint16_t)C.major;
    g_table.ops.abi_minor = (uint16_t)C.minor;
    g_table.ops.name = C.name;
    g_table.ops.priority = C.priority;
    g_table.ops.caps = (uint32_t)C.caps;
    for (size_t i = 0; i < NENTRIES; i++) {
        const struct entry_def* e = &kEntries[i];
        if (e->offset + sizeof(void*) > size || e->minor > C.minor) continue;  // a tripwire
        char key[40];
        snprintf(key, sizeof key, ",%s,", e->name);
        void* fn = strstr(C.null, key) ? NULL : e->fn;
        memcpy((char*)&g_table + e->offset, &fn, sizeof fn);
    }
    return C.guard && size > sizeof(hal_backend_ops) ? guarded() : &g_table.ops;
}
