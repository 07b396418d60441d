/* GIVEN: a user-mode driver (UMD) in one program: what the tests run against your driver, and
 * what you can run by hand (python kernel.py run -- ./umd latency 200). Do not edit.
 *
 *   umd efault            every ioctl with bad pointers: NULL, unmapped, read-only, cut short
 *   umd threads T N       T threads share one open; each submits N times (1 command) and waits
 *   umd procs P N         the same with P forked processes sharing the open
 *   umd own P N           P forked processes, each with its own open (contexts are isolated)
 *   umd latency N [poll]  N times: one NOP, SUBMIT, WAIT (or poll for POLLIN); submit ->
 *                         complete in microseconds
 *   umd churn N           N times: open, map, submit, close without waiting (release with work
 *                         in flight)
 *
 * Each prints one line of JSON (or "error: ..." and exits 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kgpu_uapi.h"

#define MEM_BYTES (KGPU_RING_BYTES + KGPU_VRAM_BYTES)
#define WAIT_NS 2000000000ULL /* 2 s: the work of a test takes milliseconds */

static void die(const char *what)
{
	printf("error: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int open_kgpu(void)
{
	int fd = open("/dev/kgpu0", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		die("open /dev/kgpu0");
	return fd;
}

static char *map_kgpu(int fd)
{
	char *mem = mmap(NULL, MEM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (mem == MAP_FAILED)
		die("mmap");
	return mem;
}

/* Every slot of the ring: INC of the counter at offset 0 of the context's memory. Any order of
 * SUBMITs then runs the same commands: the count says how many ran. */
static void fill_with_inc(char *mem)
{
	struct kgpu_cmd *ring = (struct kgpu_cmd *)mem;
	int i;

	for (i = 0; i < KGPU_RING_ENTRIES; i++)
		ring[i] = (struct kgpu_cmd){ .op = KGPU_OP_INC, .a = 0 };
}

static uint64_t counter(char *mem)
{
	return *(volatile uint64_t *)(mem + KGPU_RING_BYTES);
}

static int submit(int fd, uint32_t count, uint64_t *fence)
{
	struct kgpu_submit s = { .count = count };
	int tries;

	for (tries = 0; tries < 1000; tries++) { /* EBUSY: the ring is full, try again */
		if (ioctl(fd, KGPU_IOC_SUBMIT, &s) == 0) {
			*fence = s.fence;
			return 0;
		}
		if (errno != EBUSY)
			return -1;
		usleep(1000);
	}
	return -1;
}

static int wait_fence(int fd, uint64_t fence, uint64_t timeout_ns)
{
	struct kgpu_wait w = { .fence = fence, .timeout_ns = timeout_ns };

	return ioctl(fd, KGPU_IOC_WAIT, &w);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ efault */
static void efault(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = open_kgpu();
	char *gone = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *ro = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct {
		const char *name;
		unsigned long cmd;
		void *arg;
	} cases[] = {
		{ "info_null", KGPU_IOC_INFO, NULL },
		{ "info_unmapped", KGPU_IOC_INFO, NULL },
		{ "info_readonly", KGPU_IOC_INFO, NULL },
		{ "info_cut_short", KGPU_IOC_INFO, NULL },
		{ "set_param_null", KGPU_IOC_SET_PARAM, NULL },
		{ "set_param_unmapped", KGPU_IOC_SET_PARAM, NULL },
		{ "get_param_readonly", KGPU_IOC_GET_PARAM, NULL },
		{ "submit_unmapped", KGPU_IOC_SUBMIT, NULL },
		{ "wait_unmapped", KGPU_IOC_WAIT, NULL },
	};
	size_t i;

	if (gone == MAP_FAILED || ro == MAP_FAILED || two == MAP_FAILED)
		die("mmap");
	munmap(gone, (size_t)page);
	munmap(two + page, (size_t)page); /* a struct that starts in the last bytes of a page */
	cases[1].arg = gone;
	cases[2].arg = ro;
	cases[3].arg = two + page - 4;
	cases[5].arg = gone + 8;
	cases[6].arg = ro; /* readable, so the request is read; the answer cannot be written */
	cases[7].arg = gone;
	cases[8].arg = gone;
	printf("{");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = ioctl(fd, cases[i].cmd, cases[i].arg);

		printf("%s\"%s\": %d", i ? ", " : "", cases[i].name, r == 0 ? 0 : errno);
	}
	printf("}\n");
	close(fd);
}

/* ------------------------------------------------------------------ threads / processes */
struct shared {
	int fd;
	int n;
	uint64_t *fences; /* n per worker */
	int failures;
	int first_errno;
	pthread_mutex_t lock;
};

static volatile int stop_all; /* one worker failed: the others stop too (threads) */

static void worker(struct shared *sh, int w)
{
	int i;

	for (i = 0; i < sh->n && !stop_all; i++) {
		uint64_t fence = 0;
		int err = 0;

		if (submit(sh->fd, 1, &fence) != 0 || wait_fence(sh->fd, fence, WAIT_NS) != 0)
			err = errno ? errno : EIO;
		sh->fences[(size_t)w * (size_t)sh->n + (size_t)i] = fence;
		if (err) {
			pthread_mutex_lock(&sh->lock);
			if (!sh->failures++)
				sh->first_errno = err;
			stop_all = 1;
			pthread_mutex_unlock(&sh->lock);
			return;
		}
	}
}

static void *thread_main(void *arg)
{
	struct shared *sh = ((void **)arg)[0];
	int w = (int)(long)((void **)arg)[1];

	worker(sh, w);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *mode, int workers, int n, uint64_t *fences, uint64_t count,
		   int failures, int first_errno)
{
	size_t total = (size_t)workers * (size_t)n, i, distinct = 0;
	uint64_t maxf = 0;

	qsort(fences, total, sizeof(*fences), cmp_u64);
	for (i = 0; i < total; i++) {
		if (fences[i] && (i == 0 || fences[i] != fences[i - 1]))
			distinct++;
		if (fences[i] > maxf)
			maxf = fences[i];
	}
	printf("{\"mode\": \"%s\", \"workers\": %d, \"each\": %d, \"distinct_fences\": %zu, "
	       "\"max_fence\": %llu, \"commands_run\": %llu, \"failures\": %d, \"errno\": %d}\n",
	       mode, workers, n, distinct, (unsigned long long)maxf, (unsigned long long)count,
	       failures, first_errno);
}

static void threads(int t, int n)
{
	struct shared sh = { .n = n, .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_t *ids = calloc((size_t)t, sizeof(*ids));
	void *(*args)[2] = calloc((size_t)t, sizeof(*args));
	char *mem;
	int i;

	sh.fd = open_kgpu();
	mem = map_kgpu(sh.fd);
	fill_with_inc(mem);
	sh.fences = calloc((size_t)t * (size_t)n, sizeof(uint64_t));
	for (i = 0; i < t; i++) {
		args[i][0] = &sh;
		args[i][1] = (void *)(long)i;
		pthread_create(&ids[i], NULL, thread_main, args[i]);
	}
	for (i = 0; i < t; i++)
		pthread_join(ids[i], NULL);
	report("threads", t, n, sh.fences, counter(mem), sh.failures, sh.first_errno);
	munmap(mem, MEM_BYTES);
	close(sh.fd);
}

static void procs(int p, int n, int own)
{
	size_t bytes = (size_t)p * (size_t)n * sizeof(uint64_t) + 4096;
	uint64_t *fences = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int *status = (int *)(fences + (size_t)p * (size_t)n); /* per child: errno, counter, ctx */
	int fd = -1, i, failures = 0, first = 0;
	uint64_t count = 0;
	char *mem = NULL;

	if (fences == MAP_FAILED)
		die("mmap");
	if (!own) {
		fd = open_kgpu();
		mem = map_kgpu(fd);
		fill_with_inc(mem);
	}
	for (i = 0; i < p; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			struct shared sh = { .n = n, .lock = PTHREAD_MUTEX_INITIALIZER };
			char *m = mem;

			sh.fd = fd;
			if (own) {
				sh.fd = open_kgpu();
				m = map_kgpu(sh.fd);
				fill_with_inc(m);
			}
			sh.fences = fences;
			worker(&sh, i);
			status[3 * i] = sh.first_errno;
			status[3 * i + 1] = (int)counter(m);
			if (own) {
				struct kgpu_info info;

				status[3 * i + 2] = ioctl(sh.fd, KGPU_IOC_INFO, &info) == 0 ? (int)info.ctx_id : -1;
				close(sh.fd);
			}
			_exit(0);
		}
	}
	for (i = 0; i < p; i++) {
		int st;

		wait(&st);
	}
	for (i = 0; i < p; i++) {
		if (status[3 * i]) {
			if (!failures++)
				first = status[3 * i];
		}
		if (own && status[3 * i + 1] != n) /* each context counts only its own commands */
			failures++;
	}
	if (own) {
		int j;

		for (i = 0; i < p; i++) /* distinct contexts */
			for (j = 0; j < i; j++)
				failures += status[3 * i + 2] == status[3 * j + 2];
		count = 0;
		for (i = 0; i < p; i++)
			count += (uint64_t)status[3 * i + 1];
	} else {
		count = counter(mem);
	}
	if (own) {
		/* fences restart at 1 in every context: report them per context */
		printf("{\"mode\": \"own\", \"workers\": %d, \"each\": %d, \"commands_run\": %llu, "
		       "\"failures\": %d, \"errno\": %d}\n",
		       p, n, (unsigned long long)count, failures, first);
	} else {
		report("procs", p, n, fences, count, failures, first);
		munmap(mem, MEM_BYTES);
		close(fd);
	}
}

/* ------------------------------------------------------------------ latency */
static void latency(int n, int use_poll)
{
	int fd = open_kgpu(), i;
	char *mem = map_kgpu(fd);
	struct kgpu_cmd *ring = (struct kgpu_cmd *)mem;
	uint64_t *us = calloc((size_t)n, sizeof(uint64_t)), sum = 0;

	for (i = 0; i < n; i++) {
		uint64_t fence, t0;

		ring[i % KGPU_RING_ENTRIES] = (struct kgpu_cmd){ .op = KGPU_OP_NOP };
		t0 = now_ns();
		if (submit(fd, 1, &fence) != 0)
			die("SUBMIT");
		if (use_poll) {
			struct pollfd p = { .fd = fd, .events = POLLIN };

			if (poll(&p, 1, 2000) != 1 || !(p.revents & POLLIN))
				die("poll");
		} else if (wait_fence(fd, fence, WAIT_NS) != 0) {
			die("WAIT");
		}
		us[i] = (now_ns() - t0) / 1000;
		sum += us[i];
	}
	qsort(us, (size_t)n, sizeof(*us), cmp_u64);
	printf("{\"n\": %d, \"via\": \"%s\", \"p50_us\": %llu, \"p90_us\": %llu, \"p99_us\": %llu, \"max_us\": %llu, "
	       "\"mean_us\": %llu}\n",
	       n, use_poll ? "poll" : "wait", (unsigned long long)us[n / 2], (unsigned long long)us[n * 9 / 10],
	       (unsigned long long)us[n * 99 / 100], (unsigned long long)us[n - 1],
	       (unsigned long long)(sum / (uint64_t)n));
	munmap(mem, MEM_BYTES);
	close(fd);
}

static void churn(int n)
{
	int i;

	for (i = 0; i < n; i++) {
		int fd = open_kgpu();
		char *mem = map_kgpu(fd);
		struct kgpu_cmd *ring = (struct kgpu_cmd *)mem;
		uint64_t fence;

		ring[0] = (struct kgpu_cmd){ .op = KGPU_OP_DELAY, .a = 2000 };
		ring[1] = (struct kgpu_cmd){ .op = i % 2 ? KGPU_OP_HANG : KGPU_OP_NOP };
		if (submit(fd, 2, &fence) != 0)
			die("SUBMIT");
		munmap(mem, MEM_BYTES);
		close(fd); /* with the work in flight, or hung */
	}
	printf("{\"opened\": %d}\n", n);
}

int main(int argc, char **argv)
{
	int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 2 && strcmp(argv[1], "efault") == 0)
		efault();
	else if (argc == 4 && strcmp(argv[1], "threads") == 0 && a > 0 && b > 0)
		threads(a, b);
	else if (argc == 4 && strcmp(argv[1], "procs") == 0 && a > 0 && b > 0)
		procs(a, b, 0);
	else if (argc == 4 && strcmp(argv[1], "own") == 0 && a > 0 && b > 0)
		procs(a, b, 1);
	else if ((argc == 3 || argc == 4) && strcmp(argv[1], "latency") == 0 && a > 0)
		latency(a, argc == 4 && strcmp(argv[3], "poll") == 0);
	else if (argc == 3 && strcmp(argv[1], "churn") == 0 && a > 0)
		churn(a);
	else {
		fprintf(stderr, "usage: see the top of umd.c\n");
		return 2;
	}
	return 0;
}
