/* GIVEN: the "kernel" process that runs your driver in user space. Do not edit.
 *
 *   ./kernel NAME     load the module (module_init), serve user programs on the abstract unix
 *                     socket NAME (kgpu_preload.c connects to it), print "kgpu-kernel: ready";
 *                     on SIGTERM release what is still open, unload (module_exit) and report
 *                     memory the module did not free; on SIGUSR1 report the driver calls in
 *                     progress and what the module has allocated now (the tests compare it
 *                     before and after opens and closes, and name the call a program hung in).
 *
 * Each request of a user program runs on a thread of its own here, as system calls run on the
 * calling task in Linux: two threads of a program calling ioctl at once reach your driver at
 * once. A file is released when the last process holding it closes it or exits.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kshim.h"
#include "kshim_proto.h"

#define KGPU_TODO (-4000) /* kgpu_kernel.h's */

/* The kernel is built with -Wl,--wrap=malloc,... (kernel.py): the driver's calls of libc's
 * allocators land in the __wrap_ functions below and are counted (libc's heap is not a kernel
 * allocator: kmalloc and vmalloc_user are). The shim's own bookkeeping uses the real ones. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
#define malloc __real_malloc
#define calloc __real_calloc
#define realloc __real_realloc
#define free __real_free

/* The simulated GPU (kgpu_hw.c) says whether memory is still used by a bound channel: its
 * ring, its memory or its interrupt cookie (the channel's id, what in *what), else -1. */
int kgpu_hw_in_use(const void *p, unsigned long len, const char **what) __attribute__((weak));

extern kshim_initcall_t kshim_module_init __attribute__((weak));
extern kshim_exitcall_t kshim_module_exit __attribute__((weak));

/* Under ThreadSanitizer the shim's own bookkeeping (the allocators' counts, the device lookup
 * of open) orders nothing: its locks would otherwise order every two opens, and a driver's
 * unsynchronised counter would pass. The driver's and the GPU's locks still order. */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreSyncBegin(const char *file, int line);
void AnnotateIgnoreSyncEnd(const char *file, int line);
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define QUIET_BEGIN()                                           \
	do {                                                    \
		AnnotateIgnoreSyncBegin(__FILE__, __LINE__);    \
		AnnotateIgnoreReadsBegin(__FILE__, __LINE__);   \
		AnnotateIgnoreWritesBegin(__FILE__, __LINE__);  \
	} while (0)
#define QUIET_END()                                             \
	do {                                                    \
		AnnotateIgnoreWritesEnd(__FILE__, __LINE__);    \
		AnnotateIgnoreReadsEnd(__FILE__, __LINE__);     \
		AnnotateIgnoreSyncEnd(__FILE__, __LINE__);      \
	} while (0)
#else
#define QUIET_BEGIN() do { } while (0)
#define QUIET_END() do { } while (0)
#endif
/* The allocators' lock: bookkeeping only, invisible to ThreadSanitizer (see QUIET_BEGIN). */
#define ALLOC_LOCK() do { QUIET_BEGIN(); pthread_mutex_lock(&alloc_lock); } while (0)
#define ALLOC_UNLOCK() do { pthread_mutex_unlock(&alloc_lock); QUIET_END(); } while (0)

/* ------------------------------------------------------------------ printk */
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

int printk(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (fmt[0] == '<' && fmt[1] && fmt[2] == '>')
		fmt += 3;
	pthread_mutex_lock(&print_lock);
	fputs("kernel: ", stderr);
	va_start(ap, fmt);
	n = vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	pthread_mutex_unlock(&print_lock);
	return n;
}

int kshim_warn_on(int cond, const char *what, const char *file, int line)
{
	if (cond)
		printk("WARNING: %s at %s:%d\n", what, file, line);
	return cond;
}

void kshim_bug(const char *what, const char *file, int line)
{
	printk("BUG: %s at %s:%d\n", what, file, line);
	abort();
}

/* ------------------------------------------------------------------ memory */
#define KMAGIC 0x6b6d616c6c6f6321ULL
static long kmallocs, kmalloc_bytes; /* outstanding, under alloc_lock */
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;

struct khdr {
	u64 magic;
	u64 size;
};

void *kmalloc(size_t size, gfp_t flags)
{
	struct khdr *h = malloc(sizeof(*h) + size);

	(void)flags;
	if (!h)
		return NULL;
	h->magic = KMAGIC;
	h->size = size;
	ALLOC_LOCK();
	kmallocs++;
	kmalloc_bytes += (long)size;
	ALLOC_UNLOCK();
	return h + 1;
}

void *kzalloc(size_t size, gfp_t flags)
{
	void *p = kmalloc(size, flags);

	if (p)
		memset(p, 0, size);
	return p;
}

void *kcalloc(size_t n, size_t size, gfp_t flags)
{
	if (size && n > (size_t)-1 / size)
		return NULL;
	return kzalloc(n * size, flags);
}

static long use_after_frees; /* frees of memory a bound channel still used, under alloc_lock */

/* Freeing what the GPU may still touch (before kgpu_hw_unbind) is a use after free: the engine
 * writes into freed memory, the interrupt calls the handler with a freed cookie. */
static void check_in_use(const char *how, const void *p, unsigned long len)
{
	const char *what = "";
	int ch = kgpu_hw_in_use ? kgpu_hw_in_use(p, len, &what) : -1;

	if (ch < 0)
		return;
	ALLOC_LOCK();
	use_after_frees++;
	ALLOC_UNLOCK();
	printk("kgpu: BUG: use after free: %s(%p) frees %s of GPU channel %d, still bound: the "
	       "engine and the interrupt may still use it (kgpu_hw_unbind first, then free)\n",
	       how, p, what, ch);
}

void kfree(const void *p)
{
	struct khdr *h;

	if (!p)
		return;
	h = (struct khdr *)p - 1;
	if (h->magic != KMAGIC) {
		printk("BUG: kfree(%p): not from kmalloc, or freed twice\n", p);
		abort();
	}
	h->magic = 0;
	check_in_use("kfree", p, (unsigned long)h->size);
	ALLOC_LOCK();
	kmallocs--;
	kmalloc_bytes -= (long)h->size;
	ALLOC_UNLOCK();
	memset(h + 1, 0x6b, h->size); /* POISON_FREE, as SLUB's debug: a use after free reads it */
	free(h);
}

struct vmem {
	struct vmem *next;
	void *addr;
	unsigned long size;
	int memfd;
};
static struct vmem *vmems; /* under alloc_lock */

void *vmalloc_user(unsigned long size)
{
	unsigned long len = PAGE_ALIGN(size ? size : 1);
	struct vmem *v = malloc(sizeof(*v));
	int fd;
	void *p;

	if (!v)
		return NULL;
	fd = memfd_create("kgpu-vmalloc", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
		if (fd >= 0)
			close(fd);
		free(v);
		return NULL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		free(v);
		return NULL;
	}
	v->addr = p;
	v->size = len;
	v->memfd = fd;
	ALLOC_LOCK();
	v->next = vmems;
	vmems = v;
	ALLOC_UNLOCK();
	return p; /* a new memfd reads as zeros */
}

void *vzalloc(unsigned long size)
{
	return vmalloc_user(size);
}

void vfree(const void *p)
{
	struct vmem **pp, *v = NULL;

	if (!p)
		return;
	ALLOC_LOCK();
	for (pp = &vmems; *pp; pp = &(*pp)->next) {
		if ((*pp)->addr == p) {
			v = *pp;
			*pp = v->next;
			break;
		}
	}
	ALLOC_UNLOCK();
	if (!v) {
		printk("BUG: vfree(%p): not from vmalloc_user, or freed twice\n", p);
		abort();
	}
	check_in_use("vfree", v->addr, v->size);
	munmap(v->addr, v->size); /* user mappings keep the pages: they hold the memfd */
	close(v->memfd);
	free(v);
}

/* libc's allocators called by the driver (see the top): counted like kmalloc. */
static long libc_allocs, libc_bytes; /* outstanding, under alloc_lock */
static int libc_said;

static void *libc_count(void *p, const char *fn)
{
	int first;

	if (!p)
		return NULL;
	ALLOC_LOCK();
	libc_allocs++;
	libc_bytes += (long)malloc_usable_size(p);
	first = !libc_said;
	libc_said = 1;
	ALLOC_UNLOCK();
	if (first)
		printk("kgpu: the driver called %s(): libc's heap is not a kernel allocator (kmalloc, "
		       "kzalloc, vmalloc_user); counted with what it holds\n", fn);
	return p;
}

static void libc_uncount(void *p)
{
	if (!p)
		return;
	ALLOC_LOCK();
	libc_allocs--;
	libc_bytes -= (long)malloc_usable_size(p);
	ALLOC_UNLOCK();
}

void *__wrap_malloc(size_t size) { return libc_count(__real_malloc(size), "malloc"); }
void *__wrap_calloc(size_t n, size_t size) { return libc_count(__real_calloc(n, size), "calloc"); }
void __wrap_free(void *p) { libc_uncount(p); __real_free(p); }

void *__wrap_realloc(void *p, size_t size)
{
	void *q;

	libc_uncount(p);
	q = __real_realloc(p, size);
	if (!q && p && size) /* failed: p is still allocated */
		return libc_count(p, "realloc"), NULL;
	return libc_count(q, "realloc");
}

void *__wrap_reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > (size_t)-1 / size) {
		errno = ENOMEM;
		return NULL;
	}
	return __wrap_realloc(p, n * size);
}

char *__wrap_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = __real_malloc(n);

	if (p)
		memcpy(p, s, n);
	return libc_count(p, "strdup");
}

char *__wrap_strndup(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	char *p = __real_malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return libc_count(p, "strndup");
}

int __real_posix_memalign(void **p, size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
	int ret = __real_posix_memalign(p, align, size);

	if (ret == 0)
		libc_count(*p, "posix_memalign");
	return ret;
}

void *__real_aligned_alloc(size_t align, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size)
{
	return libc_count(__real_aligned_alloc(align, size), "aligned_alloc");
}

void *__real_memalign(size_t align, size_t size);
void *__wrap_memalign(size_t align, size_t size)
{
	return libc_count(__real_memalign(align, size), "memalign");
}

void *__real_valloc(size_t size);
void *__wrap_valloc(size_t size) { return libc_count(__real_valloc(size), "valloc"); }

int remap_vmalloc_range(struct vm_area_struct *vma, void *addr, unsigned long pgoff)
{
	unsigned long want = vma->vm_end - vma->vm_start;
	struct vmem *v;
	int ret = -EINVAL;

	ALLOC_LOCK();
	for (v = vmems; v; v = v->next) {
		if (v->addr != addr)
			continue;
		if (pgoff <= v->size >> PAGE_SHIFT && want <= v->size - (pgoff << PAGE_SHIFT)) {
			vma->kshim_memfd = v->memfd;
			vma->kshim_offset = pgoff << PAGE_SHIFT;
			ret = 0;
		}
		break;
	}
	ALLOC_UNLOCK();
	if (!v)
		printk("remap_vmalloc_range: %p is not the start of a vmalloc_user() area\n", addr);
	return ret;
}

/* ------------------------------------------------------------------ user memory */
static __thread pid_t user_pid; /* the process whose request this thread runs */

/* The driver call this thread is in (set around ioctl, mmap and poll): what user memory it
 * read so far, and the locks it holds. A user struct read twice in one call is a double fetch:
 * another thread of the program may change it between the reads (the value checked is not the
 * value used). */
#define FETCHES 16
struct call_state {
	const char *what; /* "ioctl", "poll", "mmap"; NULL: not in a call */
	unsigned int nr;  /* the ioctl's _IOC_NR */
	unsigned long lo[FETCHES], hi[FETCHES];
	int fetches, told_fetch, told_sleep;
};
static __thread struct call_state call;
static __thread int locks_held; /* mutexes and spinlocks this thread holds */

static void call_begin(const char *what, unsigned int nr)
{
	memset(&call, 0, sizeof(call));
	call.what = what;
	call.nr = nr;
}

static void call_end(void)
{
	call.what = NULL;
}

static void note_fetch(unsigned long from, unsigned long n)
{
	unsigned long end = from + n;
	int i;

	if (!call.what || n == 0)
		return;
	for (i = 0; i < call.fetches && i < FETCHES; i++) {
		if (from < call.hi[i] && call.lo[i] < end && !call.told_fetch) {
			call.told_fetch = 1;
			printk("kgpu: BUG: double fetch: %s (nr %u) read user memory %#lx..%#lx with "
			       "copy_from_user again: a value checked after the first read may differ in "
			       "the second (copy each user struct once, then use the copy)\n",
			       call.what, call.nr, max(from, call.lo[i]), min(end, call.hi[i]));
		}
	}
	if (call.fetches < FETCHES) {
		call.lo[call.fetches] = from;
		call.hi[call.fetches] = end;
	}
	call.fetches++;
}

/* A sleep of a driver call (wait_event, msleep, usleep_range) with a lock held. */
static void note_sleep(const char *how)
{
	if (!call.what || locks_held <= 0 || call.told_sleep)
		return;
	call.told_sleep = 1;
	printk("kgpu: BUG: %s (nr %u) sleeps in %s holding %d lock(s): every caller that needs "
	       "them waits as long (release every lock before sleeping)\n",
	       call.what, call.nr, how, locks_held);
}

static unsigned long user_copy(void *local, void *remote, unsigned long n, int write)
{
	struct iovec l = { local, n }, r = { remote, n };
	ssize_t got;

	if (n == 0)
		return 0;
	if (!user_pid)
		return n;
	got = write ? process_vm_writev(user_pid, &l, 1, &r, 1, 0)
		    : process_vm_readv(user_pid, &l, 1, &r, 1, 0);
	if (got < 0) {
		if (errno != EFAULT)
			printk("copy_%s_user: %s (process %d)\n", write ? "to" : "from",
			       strerror(errno), (int)user_pid);
		return n;
	}
	return n - (unsigned long)got;
}

unsigned long copy_from_user(void *to, const void __user *from, unsigned long n)
{
	unsigned long left = user_copy(to, (void *)from, n, 0);

	note_fetch((unsigned long)from, n);
	if (left) /* the kernel zeroes what it could not copy */
		memset((char *)to + (n - left), 0, left);
	return left;
}

unsigned long copy_to_user(void __user *to, const void *from, unsigned long n)
{
	return user_copy((void *)from, to, n, 1);
}

unsigned long clear_user(void __user *to, unsigned long n)
{
	static const char zeros[4096];
	unsigned long done = 0;

	while (done < n) {
		unsigned long chunk = min(n - done, (unsigned long)sizeof(zeros));
		unsigned long left = copy_to_user((char *)to + done, zeros, chunk);

		if (left)
			return n - done - (chunk - left);
		done += chunk;
	}
	return 0;
}

/* ------------------------------------------------------------------ locks */
/* Each thread counts the locks it holds: a driver call that sleeps holding one is reported. */
void mutex_init(struct mutex *lock) { pthread_mutex_init(&lock->m, NULL); }
void mutex_lock(struct mutex *lock) { pthread_mutex_lock(&lock->m); locks_held++; }

int mutex_lock_interruptible(struct mutex *lock)
{
	if (pthread_mutex_lock(&lock->m))
		return -EINTR;
	locks_held++;
	return 0;
}

int mutex_trylock(struct mutex *lock)
{
	int ok = pthread_mutex_trylock(&lock->m) == 0;

	locks_held += ok;
	return ok;
}

void mutex_unlock(struct mutex *lock) { locks_held--; pthread_mutex_unlock(&lock->m); }
void mutex_destroy(struct mutex *lock) { pthread_mutex_destroy(&lock->m); }
void spin_lock_init(spinlock_t *lock) { pthread_mutex_init(&lock->m, NULL); }
void spin_lock(spinlock_t *lock) { pthread_mutex_lock(&lock->m); locks_held++; }
void spin_unlock(spinlock_t *lock) { locks_held--; pthread_mutex_unlock(&lock->m); }

/* ------------------------------------------------------------------ time */
static u64 now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec;
}

u64 ktime_get_ns(void) { return now_ns(CLOCK_MONOTONIC); }
unsigned long kshim_jiffies(void) { return (unsigned long)(ktime_get_ns() / 1000000); }

static void sleep_ns(u64 ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void msleep(unsigned int msecs) { note_sleep("msleep"); sleep_ns((u64)msecs * 1000000ULL); }

void usleep_range(unsigned long min_us, unsigned long max_us)
{
	(void)max_us;
	note_sleep("usleep_range");
	sleep_ns((u64)min_us * 1000ULL);
}
void cond_resched(void) { sched_yield(); }

static unsigned long irq_delay_us; /* set in main, before module_init */

unsigned long kshim_irq_delay_us(void) { return irq_delay_us; }

void udelay(unsigned long usecs)
{
	u64 end = ktime_get_ns() + (u64)usecs * 1000ULL;

	while (ktime_get_ns() < end)
		;
}

/* ------------------------------------------------------------------ kernel threads */
struct task_struct {
	pthread_t thread;
	int (*fn)(void *data);
	void *data;
	int stop;
	int ret;
};
static __thread struct task_struct *current_task;

bool kthread_should_stop(void)
{
	return current_task && __atomic_load_n(&current_task->stop, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------------------ wait queues */
static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poll_cond = PTHREAD_COND_INITIALIZER;
static unsigned long poll_gen; /* bumped by every wake_up: poll() looks again */

void init_waitqueue_head(wait_queue_head_t *wq)
{
	pthread_mutex_init(&wq->m, NULL);
	pthread_cond_init(&wq->c, NULL);
	wq->seq = 0;
}

void wake_up(wait_queue_head_t *wq)
{
	pthread_mutex_lock(&wq->m);
	wq->seq++;
	pthread_cond_broadcast(&wq->c);
	pthread_mutex_unlock(&wq->m);
	pthread_mutex_lock(&poll_lock);
	poll_gen++;
	pthread_cond_broadcast(&poll_cond);
	pthread_mutex_unlock(&poll_lock);
}

unsigned long kshim_wait_seq(wait_queue_head_t *wq)
{
	unsigned long seq;

	pthread_mutex_lock(&wq->m);
	seq = wq->seq;
	pthread_mutex_unlock(&wq->m);
	return seq;
}

static struct timespec realtime_after_ms(long ms)
{
	u64 t = now_ns(CLOCK_REALTIME) + (u64)ms * 1000000ULL;
	struct timespec ts = { (time_t)(t / 1000000000ULL), (long)(t % 1000000000ULL) };

	return ts;
}

void kshim_wait_change(wait_queue_head_t *wq, unsigned long seq, unsigned long deadline)
{
	/* A kernel thread looks at kthread_should_stop every 20 ms (kthread_stop wakes it). */
	long slice = current_task ? 20 : 1000;

	note_sleep("wait_event");
	pthread_mutex_lock(&wq->m);
	while (wq->seq == seq && !kthread_should_stop()) {
		long ms = slice;
		struct timespec ts;

		if (deadline) {
			long left = (long)(deadline - kshim_jiffies());

			if (left <= 0)
				break;
			ms = min(ms, left);
		}
		ts = realtime_after_ms(ms);
		pthread_cond_timedwait(&wq->c, &wq->m, &ts);
	}
	pthread_mutex_unlock(&wq->m);
}

static void *kthread_main(void *arg)
{
	struct task_struct *t = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	current_task = t;
	t->ret = t->fn(t->data);
	return NULL;
}

struct task_struct *kthread_run(int (*fn)(void *data), void *data, const char *namefmt, ...)
{
	struct task_struct *t = calloc(1, sizeof(*t));
	char name[16];
	va_list ap;

	if (!t)
		return ERR_PTR(-ENOMEM);
	t->fn = fn;
	t->data = data;
	if (pthread_create(&t->thread, NULL, kthread_main, t) != 0) {
		free(t);
		return ERR_PTR(-EAGAIN);
	}
	va_start(ap, namefmt);
	vsnprintf(name, sizeof(name), namefmt, ap);
	va_end(ap);
	pthread_setname_np(t->thread, name);
	return t;
}

int kthread_stop(struct task_struct *t)
{
	int ret;

	__atomic_store_n(&t->stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(t->thread, NULL);
	ret = t->ret;
	free(t);
	return ret;
}

/* ------------------------------------------------------------------ poll */
#define POLL_QUEUES 8
struct poll_table_struct {
	wait_queue_head_t *queues[POLL_QUEUES];
	int n;
};

void poll_wait(struct file *file, wait_queue_head_t *wq, poll_table *pt)
{
	(void)file;
	if (pt && wq && pt->n < POLL_QUEUES)
		pt->queues[pt->n++] = wq;
}

/* ------------------------------------------------------------------ devices and files */
#define MAX_MISC 8
static struct miscdevice *miscs[MAX_MISC];
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

int misc_register(struct miscdevice *misc)
{
	int i, free_slot = -1;

	pthread_mutex_lock(&files_lock);
	for (i = 0; i < MAX_MISC; i++) {
		if (miscs[i] && strcmp(miscs[i]->name, misc->name) == 0) {
			pthread_mutex_unlock(&files_lock);
			return -EBUSY;
		}
		if (!miscs[i] && free_slot < 0)
			free_slot = i;
	}
	if (free_slot >= 0) {
		miscs[free_slot] = misc;
		if (misc->minor == MISC_DYNAMIC_MINOR)
			misc->minor = 64 + free_slot;
	}
	pthread_mutex_unlock(&files_lock);
	if (free_slot < 0)
		return -EBUSY;
	printk("misc %s: registered as /dev/%s (char %d:%d)\n", misc->name, misc->name, MISC_MAJOR,
	       misc->minor);
	return 0;
}

void misc_deregister(struct miscdevice *misc)
{
	int i;

	pthread_mutex_lock(&files_lock);
	for (i = 0; i < MAX_MISC; i++) {
		if (miscs[i] == misc)
			miscs[i] = NULL;
	}
	pthread_mutex_unlock(&files_lock);
}

struct kfile {
	struct file file;
	struct inode inode;
	u64 id;
	int refs; /* holders + calls in progress, under files_lock */
	struct kfile *next;
};

struct holder { /* one user process */
	pid_t pid;
	u64 *ids; /* the files it holds, once per reference */
	int n, cap;
	struct holder *next;
};

static struct kfile *kfiles;
static struct holder *holders;
static u64 next_file_id = 1;
static long files_open;

static void report_todo(const char *what)
{
	printk("kgpu: not started: %s returned KGPU_TODO\n", what);
}

static struct holder *holder_of(pid_t pid, int create)
{
	struct holder *h;

	for (h = holders; h; h = h->next) {
		if (h->pid == pid)
			return h;
	}
	if (!create)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->pid = pid;
	h->next = holders;
	holders = h;
	return h;
}

static int hold(struct holder *h, u64 id)
{
	if (h->n == h->cap) {
		int cap = h->cap ? 2 * h->cap : 8;
		u64 *ids = realloc(h->ids, sizeof(*ids) * (size_t)cap);

		if (!ids)
			return -ENOMEM;
		h->ids = ids;
		h->cap = cap;
	}
	h->ids[h->n++] = id;
	return 0;
}

static int unhold(struct holder *h, u64 id)
{
	int i;

	for (i = 0; i < h->n; i++) {
		if (h->ids[i] == id) {
			h->ids[i] = h->ids[--h->n];
			return 1;
		}
	}
	return 0;
}

static struct kfile *kfile_get(u64 id, pid_t pid) /* a reference for one call */
{
	struct holder *h;
	struct kfile *f;
	int i;

	pthread_mutex_lock(&files_lock);
	h = holder_of(pid, 0);
	for (i = 0; h && i < h->n; i++) {
		if (h->ids[i] == id)
			break;
	}
	for (f = kfiles; f && h && i < h->n; f = f->next) {
		if (f->id == id) {
			f->refs++;
			break;
		}
	}
	if (!h || i == h->n)
		f = NULL;
	pthread_mutex_unlock(&files_lock);
	return f;
}

static void kfile_put(struct kfile *f)
{
	struct kfile **pp;
	int last;

	pthread_mutex_lock(&files_lock);
	last = --f->refs == 0;
	if (last) {
		for (pp = &kfiles; *pp; pp = &(*pp)->next) {
			if (*pp == f) {
				*pp = f->next;
				break;
			}
		}
	}
	pthread_mutex_unlock(&files_lock);
	if (!last)
		return;
	if (f->file.f_op->release) {
		int ret = f->file.f_op->release(&f->inode, &f->file);

		if (ret == KGPU_TODO)
			report_todo("release");
	}
	free(f);
	pthread_mutex_lock(&files_lock);
	files_open--; /* after release returned: unload waits for it */
	pthread_mutex_unlock(&files_lock);
}

static long do_open(const char *name, unsigned int flags, pid_t pid)
{
	struct miscdevice *misc = NULL;
	struct holder *h;
	struct kfile *f;
	int i, ret;

	QUIET_BEGIN(); /* the lookup orders no two opens (see QUIET_BEGIN) */
	pthread_mutex_lock(&files_lock);
	for (i = 0; i < MAX_MISC; i++) {
		if (miscs[i] && strcmp(miscs[i]->name, name) == 0)
			misc = miscs[i];
	}
	pthread_mutex_unlock(&files_lock);
	QUIET_END();
	if (!misc)
		return -ENOENT;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->inode.i_rdev = (MISC_MAJOR << MINORBITS) | (unsigned int)misc->minor;
	f->file.f_op = misc->fops;
	f->file.f_flags = flags;
	f->file.f_mode = ((flags & O_ACCMODE) != O_WRONLY ? FMODE_READ : 0) |
			 ((flags & O_ACCMODE) != O_RDONLY ? FMODE_WRITE : 0);
	f->file.f_inode = &f->inode;
	ret = misc->fops->open ? misc->fops->open(&f->inode, &f->file) : 0;
	if (ret == KGPU_TODO)
		report_todo("open");
	if (ret) {
		free(f);
		return ret < 0 ? ret : -EINVAL;
	}
	pthread_mutex_lock(&files_lock);
	f->id = next_file_id++;
	f->refs = 1;
	h = holder_of(pid, 1);
	if (!h || hold(h, f->id) != 0) {
		pthread_mutex_unlock(&files_lock);
		if (misc->fops->release)
			misc->fops->release(&f->inode, &f->file);
		free(f);
		return -ENOMEM;
	}
	f->next = kfiles;
	kfiles = f;
	files_open++;
	pthread_mutex_unlock(&files_lock);
	return (long)f->id;
}

static long do_dup(u64 id, pid_t parent, pid_t pid)
{
	struct kfile *f = kfile_get(id, parent);
	struct holder *h;
	long ret = 0;

	if (!f) /* the child asks for what its parent held at fork; the parent may be gone */
		return -EBADF;
	pthread_mutex_lock(&files_lock);
	h = holder_of(pid, 1);
	if (h && hold(h, id) == 0)
		f->refs++;
	else
		ret = -ENOMEM;
	pthread_mutex_unlock(&files_lock);
	kfile_put(f);
	return ret;
}

static long do_close(u64 id, pid_t pid)
{
	struct kfile *f = kfile_get(id, pid);
	struct holder *h;

	if (!f)
		return -EBADF;
	pthread_mutex_lock(&files_lock);
	h = holder_of(pid, 0);
	if (h && unhold(h, id))
		f->refs--; /* the holder's reference; ours goes below */
	pthread_mutex_unlock(&files_lock);
	kfile_put(f);
	return 0;
}

static void process_exit(pid_t pid) /* close every file the process still holds */
{
	struct holder **pp, *h = NULL;
	int i;

	pthread_mutex_lock(&files_lock);
	for (pp = &holders; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid == pid) {
			h = *pp;
			*pp = h->next;
			break;
		}
	}
	pthread_mutex_unlock(&files_lock);
	if (!h)
		return;
	for (i = 0; i < h->n; i++) {
		struct kfile *f;

		pthread_mutex_lock(&files_lock);
		for (f = kfiles; f && f->id != h->ids[i]; f = f->next)
			;
		pthread_mutex_unlock(&files_lock);
		if (f)
			kfile_put(f);
	}
	free(h->ids);
	free(h);
}

static long do_ioctl(struct kfile *f, unsigned int cmd, unsigned long arg)
{
	long ret;

	if (!f->file.f_op->unlocked_ioctl)
		return -ENOTTY;
	call_begin("ioctl", _IOC_NR(cmd));
	ret = f->file.f_op->unlocked_ioctl(&f->file, cmd, arg);
	call_end();
	if (ret == KGPU_TODO) {
		char what[64];

		snprintf(what, sizeof(what), "unlocked_ioctl(nr %u)", _IOC_NR(cmd));
		report_todo(what);
	}
	return ret;
}

static long do_mmap(struct kfile *f, const struct kshim_req *rq, int *memfd, u64 *offset)
{
	struct vm_area_struct vma = { 0 };
	unsigned long len = (unsigned long)rq->a;
	int prot = (int)(rq->b & 0xffffffffu), flags = (int)(rq->b >> 32);
	long ret;

	if (!f->file.f_op->mmap)
		return -ENODEV;
	if (len == 0 || (rq->c & (PAGE_SIZE - 1)))
		return -EINVAL;
	vma.vm_start = 0x7f0000000000UL; /* the user address is chosen after your mmap returns */
	vma.vm_end = vma.vm_start + PAGE_ALIGN(len);
	vma.vm_pgoff = (unsigned long)(rq->c >> PAGE_SHIFT);
	vma.vm_flags = ((prot & PROT_READ) ? VM_READ : 0) | ((prot & PROT_WRITE) ? VM_WRITE : 0) |
		       ((flags & MAP_SHARED) ? VM_SHARED : 0);
	vma.kshim_memfd = -1;
	call_begin("mmap", 0);
	ret = f->file.f_op->mmap(&f->file, &vma);
	call_end();
	if (ret == KGPU_TODO)
		report_todo("mmap");
	if (ret)
		return ret < 0 ? ret : -EINVAL;
	if (vma.kshim_memfd < 0) {
		printk("mmap: returned 0 without mapping anything (call remap_vmalloc_range)\n");
		return -EINVAL;
	}
	*memfd = vma.kshim_memfd;
	*offset = vma.kshim_offset;
	return 0;
}

static int peer_gone(int sock)
{
	char c;
	ssize_t n = recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static long do_poll(struct kfile *f, const struct kshim_req *rq, int sock)
{
	long timeout = (long)(int64_t)rq->b;
	u64 end = timeout >= 0 ? ktime_get_ns() + (u64)timeout * 1000000ULL : 0;
	unsigned int want = (unsigned int)rq->a | EPOLLERR | EPOLLHUP;

	if (!f->file.f_op->poll)
		return (EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLWRNORM) & want; /* default_poll */
	for (;;) {
		struct poll_table_struct pt = { .n = 0 };
		unsigned long gen;
		__poll_t mask;

		pthread_mutex_lock(&poll_lock);
		gen = poll_gen;
		pthread_mutex_unlock(&poll_lock);
		call_begin("poll", 0);
		mask = f->file.f_op->poll(&f->file, &pt);
		call_end();
		if (mask == (__poll_t)KGPU_TODO) {
			report_todo("poll");
			return -ENOSYS;
		}
		if ((mask & want) || timeout == 0 || (end && ktime_get_ns() >= end))
			return mask & want;
		/* sleep until a wake_up (on any queue: then poll again) or the end; a poll that
		 * registered no queue with poll_wait is never woken, as in the kernel */
		pthread_mutex_lock(&poll_lock);
		while (poll_gen == gen || pt.n == 0) {
			long ms = 100;
			struct timespec ts;

			if (end) {
				u64 now = ktime_get_ns();

				if (now >= end)
					break;
				ms = min(ms, (long)((end - now + 999999) / 1000000));
			}
			ts = realtime_after_ms(ms);
			if (pthread_cond_timedwait(&poll_cond, &poll_lock, &ts) == ETIMEDOUT &&
			    peer_gone(sock))
				break;
		}
		pthread_mutex_unlock(&poll_lock);
		if (peer_gone(sock))
			return -EINTR;
	}
}

/* ------------------------------------------------------------------ calls in progress */
/* What each request thread is doing in the driver now: SIGUSR1 prints it, so a program that
 * never returns is reported with the driver call it waits in (poll, not WAIT). */
#define INFLIGHT 256
static struct {
	const char *what; /* NULL: a free slot */
	unsigned int nr;
	u64 since;
} inflight[INFLIGHT];
static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;

static int inflight_enter(const char *what, unsigned int nr)
{
	int i;

	QUIET_BEGIN(); /* orders no two calls */
	pthread_mutex_lock(&inflight_lock);
	for (i = 0; i < INFLIGHT && inflight[i].what; i++)
		;
	if (i < INFLIGHT) {
		inflight[i].what = what;
		inflight[i].nr = nr;
		inflight[i].since = ktime_get_ns();
	}
	pthread_mutex_unlock(&inflight_lock);
	QUIET_END();
	return i < INFLIGHT ? i : -1;
}

static void inflight_leave(int i)
{
	if (i < 0)
		return;
	QUIET_BEGIN(); /* orders no two calls */
	pthread_mutex_lock(&inflight_lock);
	inflight[i].what = NULL;
	pthread_mutex_unlock(&inflight_lock);
	QUIET_END();
}

static void inflight_report(void)
{
	char line[1024];
	size_t at = 0;
	u64 now = ktime_get_ns();
	int i;

	line[0] = 0;
	QUIET_BEGIN(); /* orders no two calls */
	pthread_mutex_lock(&inflight_lock);
	for (i = 0; i < INFLIGHT && at < sizeof(line) - 64; i++) {
		if (!inflight[i].what)
			continue;
		at += (size_t)snprintf(line + at, sizeof(line) - at, "%s%s", at ? "; " : "",
				       inflight[i].what);
		if (strcmp(inflight[i].what, "ioctl") == 0)
			at += (size_t)snprintf(line + at, sizeof(line) - at, " nr %u", inflight[i].nr);
		at += (size_t)snprintf(line + at, sizeof(line) - at, " for %.2f s",
				       (double)(now - inflight[i].since) / 1e9);
	}
	pthread_mutex_unlock(&inflight_lock);
	QUIET_END();
	printk("kgpu: in the driver now: %s\n", at ? line : "none");
}

/* ------------------------------------------------------------------ the server */
static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t got = read(fd, p, n);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

static int send_reply(int sock, const struct kshim_rep *rep, int fd)
{
	struct iovec iov = { (void *)rep, sizeof(*rep) };
	char ctl[CMSG_SPACE(sizeof(int))];
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(ctl, 0, sizeof(ctl));
		msg.msg_control = ctl;
		msg.msg_controllen = sizeof(ctl);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(*rep) ? 0 : -1;
}

static void *connection(void *arg)
{
	int sock = (int)(long)arg;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int anchor = 0;
	pid_t pid;

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		close(sock);
		return NULL;
	}
	pid = cred.pid;
	user_pid = pid;
	for (;;) {
		struct kshim_req rq;
		struct kshim_rep rep = { 0, 0 };
		struct kfile *f = NULL;
		int fd = -1, slot;

		if (read_full(sock, &rq, sizeof(rq)) != 0)
			break;
		rq.name[sizeof(rq.name) - 1] = 0;
		if (rq.op >= KSHIM_IOCTL) {
			f = kfile_get(rq.id, pid);
			if (!f) {
				rep.ret = -EBADF;
				send_reply(sock, &rep, -1);
				continue;
			}
		}
		slot = -1;
		if (rq.op == KSHIM_OPEN)
			slot = inflight_enter("open", 0);
		else if (rq.op == KSHIM_CLOSE)
			slot = inflight_enter("close", 0);
		else if (rq.op == KSHIM_IOCTL)
			slot = inflight_enter("ioctl", _IOC_NR((unsigned int)rq.a));
		else if (rq.op == KSHIM_MMAP)
			slot = inflight_enter("mmap", 0);
		else if (rq.op == KSHIM_POLL)
			slot = inflight_enter("poll", 0);
		switch (rq.op) {
		case KSHIM_HELLO:
			break;
		case KSHIM_ANCHOR:
			anchor = 1;
			break;
		case KSHIM_OPEN:
			rep.ret = do_open(rq.name, (unsigned int)rq.a, pid);
			break;
		case KSHIM_DUP:
			rep.ret = do_dup(rq.id, (pid_t)rq.a, pid);
			break;
		case KSHIM_CLOSE:
			rep.ret = do_close(rq.id, pid);
			break;
		case KSHIM_IOCTL:
			rep.ret = do_ioctl(f, (unsigned int)rq.a, (unsigned long)rq.b);
			break;
		case KSHIM_MMAP:
			rep.ret = do_mmap(f, &rq, &fd, &rep.a);
			break;
		case KSHIM_POLL:
			rep.ret = do_poll(f, &rq, sock);
			break;
		default:
			rep.ret = -EINVAL;
		}
		inflight_leave(slot);
		if (f)
			kfile_put(f);
		if (rep.ret == KGPU_TODO)
			rep.ret = -ENOSYS;
		if (send_reply(sock, &rep, fd) != 0)
			break;
	}
	close(sock);
	if (anchor)
		process_exit(pid);
	return NULL;
}

/* What the module holds right now: the tests compare it before and after a program's opens
 * and closes, so memory kept until unload (and freed only there) shows too. */
static void alloc_report(void)
{
	long n, bytes, vn = 0, vbytes = 0, ln, lbytes;
	struct vmem *v;

	ALLOC_LOCK();
	n = kmallocs;
	bytes = kmalloc_bytes;
	ln = libc_allocs;
	lbytes = libc_bytes;
	for (v = vmems; v; v = v->next) {
		vn++;
		vbytes += (long)v->size;
	}
	ALLOC_UNLOCK();
	printk("kgpu: allocated now: %ld kmalloc (%ld bytes) and %ld vmalloc_user (%ld bytes) and "
	       "%ld libc malloc (%ld bytes)\n", n, bytes, vn, vbytes, ln, lbytes);
}

static void leak_report(void)
{
	long n, bytes, vn = 0, vbytes = 0, ln, lbytes;
	struct vmem *v;

	ALLOC_LOCK();
	n = kmallocs;
	bytes = kmalloc_bytes;
	ln = libc_allocs;
	lbytes = libc_bytes;
	for (v = vmems; v; v = v->next) {
		vn++;
		vbytes += (long)v->size;
	}
	ALLOC_UNLOCK();
	if (n || vn || ln)
		printk("kgpu: leak: %ld kmalloc (%ld bytes) and %ld vmalloc_user (%ld bytes) and %ld "
		       "libc malloc (%ld bytes) allocations not freed at unload\n", n, bytes, vn,
		       vbytes, ln, lbytes);
	else
		printk("kgpu: unloaded, no memory left allocated\n");
}

/* A fault in the driver: say so, like the kernel's oops, then die of the signal. */
static void oops(int sig, siginfo_t *info, void *ctx)
{
	char msg[200];
	int n;

	(void)ctx;
	n = snprintf(msg, sizeof(msg),
		     "kernel: BUG: %s at address %p (an oops: a bad pointer dereferenced in the "
		     "driver, e.g. a user pointer used without copy_from_user)\n",
		     sig == SIGSEGV ? "unable to handle page fault" : "fatal signal", info->si_addr);
	if (n > 0)
		(void)!write(2, msg, (size_t)n);
	signal(sig, SIG_DFL);
	raise(sig);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = oops, .sa_flags = SA_SIGINFO };
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	sigset_t mask;
	int lsock, sfd, ret, i;
	socklen_t alen;

	if (argc != 2 || strlen(argv[1]) + 2 > sizeof(addr.sun_path)) {
		fprintf(stderr, "usage: %s SOCKET-NAME\n", argv[0]);
		return 2;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* every thread inherits it: signalfd gets them */
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	if (getenv("KGPU_IRQ_DELAY_US"))
		irq_delay_us = strtoul(getenv("KGPU_IRQ_DELAY_US"), NULL, 10);
	if (!kshim_module_init) {
		fprintf(stderr, "kernel: the driver has no module_init\n");
		return 1;
	}
	ret = kshim_module_init();
	if (ret) {
		printk("module_init failed: %d\n", ret);
		return 1;
	}
	lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memcpy(addr.sun_path + 1, argv[1], strlen(argv[1])); /* abstract: no file */
	alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(argv[1]));
	if (lsock < 0 || bind(lsock, (struct sockaddr *)&addr, alen) != 0 || listen(lsock, 64) != 0) {
		perror("kernel: socket");
		return 1;
	}
	printf("kgpu-kernel: ready\n");
	fflush(stdout);
	for (;;) {
		struct pollfd p[2] = { { lsock, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		pthread_attr_t attr;
		pthread_t t;
		int sock;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo == SIGUSR1) {
				inflight_report();
				alloc_report();
				continue;
			}
			break;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		sock = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
		if (sock < 0)
			continue;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, connection, (void *)(long)sock) != 0)
			close(sock);
		pthread_attr_destroy(&attr);
	}
	close(lsock);
	/* Unload: every process still holding a file exits first; calls in progress get 2 s. */
	for (;;) {
		pid_t pid;

		pthread_mutex_lock(&files_lock);
		pid = holders ? holders->pid : 0;
		pthread_mutex_unlock(&files_lock);
		if (!pid)
			break;
		process_exit(pid);
	}
	for (i = 0; i < 200; i++) {
		long open;

		pthread_mutex_lock(&files_lock);
		open = files_open;
		pthread_mutex_unlock(&files_lock);
		if (!open)
			break;
		msleep(10);
	}
	pthread_mutex_lock(&files_lock);
	i = (int)files_open;
	pthread_mutex_unlock(&files_lock);
	if (i) {
		printk("kgpu: %d files still in calls at unload (a call that never returns?)\n", i);
		fflush(stderr);
		_exit(3);
	}
	if (kshim_module_exit)
		kshim_module_exit();
	leak_report();
	return 0;
}
