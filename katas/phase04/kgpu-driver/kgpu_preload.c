/* GIVEN: the system-call side of the kernel shim, loaded into unmodified user programs with
 * LD_PRELOAD. Do not edit.
 *
 *   KGPU_SOCKET=NAME LD_PRELOAD=./libkgpu_preload.so ./your-program
 *
 * open/openat of /dev/kgpu* go to the kernel process (kshim.c) instead of the file system, and
 * so do ioctl, mmap, poll and close on the descriptors they return. The descriptor is real (an
 * eventfd): it survives fork, and other calls on it see an ordinary file. Every other path and
 * descriptor goes to libc untouched. Not routed: read/write, select/epoll, dup (a dup'd kgpu
 * descriptor is just the eventfd).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kshim_proto.h"

#define MAX_FDS 65536
static uint64_t kfds[MAX_FDS]; /* descriptor -> the kernel's file id; 0: not a kgpu file */
static pthread_mutex_t fds_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t anchor_lock = PTHREAD_MUTEX_INITIALIZER;
static int anchor = -1;      /* this process's first connection: closing it is our exit */
static pid_t anchor_pid;     /* the process that made it (a forked child makes its own) */
static __thread int conn = -1;
static __thread pid_t conn_pid;
static pthread_key_t conn_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int (*real_close)(int);
static int (*real_ioctl)(int, unsigned long, ...);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_poll)(struct pollfd *, nfds_t, int);
static int (*real_openat)(int, const char *, int, ...);

static void close_conn(void *arg)
{
	(void)arg;
	if (conn >= 0 && conn_pid == getpid())
		real_close(conn);
	conn = -1;
}

static void after_fork_child(void);

static void init(void)
{
	real_close = dlsym(RTLD_NEXT, "close");
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	real_mmap = dlsym(RTLD_NEXT, "mmap");
	real_poll = dlsym(RTLD_NEXT, "poll");
	real_openat = dlsym(RTLD_NEXT, "openat");
	pthread_key_create(&conn_key, close_conn);
	pthread_atfork(NULL, NULL, after_fork_child);
}

static void setup(void)
{
	pthread_once(&once, init);
}

static int connect_kernel(uint32_t op, uint64_t parent)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char *name = getenv(KSHIM_SOCKET_ENV);
	struct kshim_req rq = { .op = op, .a = parent };
	struct kshim_rep rep;
	socklen_t len;
	int s;

	if (!name || !*name)
		name = "kgpu-kernel";
	if (strlen(name) + 2 > sizeof(addr.sun_path))
		return -1;
	memcpy(addr.sun_path + 1, name, strlen(name));
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&addr, len) != 0) {
		real_close(s);
		return -1;
	}
	if (write(s, &rq, sizeof(rq)) != sizeof(rq) || read(s, &rep, sizeof(rep)) != sizeof(rep)) {
		real_close(s);
		return -1;
	}
	return s;
}

/* The anchor: made once per process, before its first request; the kernel closes the
 * process's files when it goes away. copy_*_user needs the kernel process to read our memory:
 * allow it where Yama restricts ptrace (Ubuntu's default). */
static int ensure_anchor(void)
{
	int ok = 1;

	pthread_mutex_lock(&anchor_lock);
	if (anchor < 0 || anchor_pid != getpid()) {
		struct ucred cred;
		socklen_t len = sizeof(cred);

		anchor = connect_kernel(KSHIM_ANCHOR, 0);
		anchor_pid = getpid();
		if (anchor >= 0 && getsockopt(anchor, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			prctl(PR_SET_PTRACER, (unsigned long)cred.pid, 0, 0, 0);
		ok = anchor >= 0;
	}
	pthread_mutex_unlock(&anchor_lock);
	return ok;
}

static int thread_conn(void)
{
	setup();
	if (!ensure_anchor())
		return -1;
	if (conn < 0 || conn_pid != getpid()) {
		conn = connect_kernel(KSHIM_HELLO, 0);
		conn_pid = getpid();
		pthread_setspecific(conn_key, (void *)1);
	}
	return conn;
}

/* One request, one reply; -errno when the kernel process cannot be reached. */
static int64_t call(struct kshim_req *rq, int *fd_out)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct kshim_rep rep;
	struct iovec iov = { &rep, sizeof(rep) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int s = thread_conn();
	const char *p = (const char *)rq;
	size_t left = sizeof(*rq);
	ssize_t got;

	if (s < 0)
		return -ENODEV; /* no kernel process: as if no driver were loaded */
	while (left) {
		ssize_t n = send(s, p, left, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		p += n;
		left -= (size_t)n;
	}
	msg.msg_control = ctl;
	msg.msg_controllen = sizeof(ctl);
	do
		got = recvmsg(s, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof(rep))
		return -EIO; /* the kernel process died: like a driver oops */
	if (fd_out) {
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

		*fd_out = -1;
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd_out, CMSG_DATA(c), sizeof(int));
		if (*fd_out >= 0)
			rq->c = rep.a; /* MMAP: the memory's offset */
	}
	return rep.ret;
}

static uint64_t kfile(int fd)
{
	uint64_t id;

	if (fd < 0 || fd >= MAX_FDS)
		return 0;
	pthread_mutex_lock(&fds_lock);
	id = kfds[fd];
	pthread_mutex_unlock(&fds_lock);
	return id;
}

static long result(int64_t ret)
{
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return (long)ret;
}

/* A forked child holds its parent's kgpu files too (as after fork in Linux). */
static void after_fork_child(void)
{
	pid_t parent = anchor_pid;
	int i;

	pthread_mutex_init(&fds_lock, NULL);
	pthread_mutex_init(&anchor_lock, NULL);
	if (conn >= 0)
		real_close(conn);
	conn = -1;
	if (anchor < 0)
		return;
	real_close(anchor);
	anchor = -1;
	for (i = 0; i < MAX_FDS; i++) {
		if (kfds[i]) {
			struct kshim_req rq = { .op = KSHIM_DUP, .id = kfds[i], .a = (uint64_t)parent };

			if (call(&rq, NULL) < 0)
				kfds[i] = 0;
		}
	}
}

static int is_kgpu_path(const char *path)
{
	return path && strncmp(path, "/dev/kgpu", 9) == 0 && !strchr(path + 5, '/');
}

static int kgpu_open(const char *path, int flags)
{
	struct kshim_req rq = { .op = KSHIM_OPEN, .a = (uint64_t)(unsigned int)flags };
	int64_t id;
	int fd, saved;

	setup();
	strncpy(rq.name, path + 5, sizeof(rq.name) - 1);
	id = call(&rq, NULL);
	if (id < 0)
		return (int)result(id);
	fd = eventfd(0, (flags & O_CLOEXEC) ? EFD_CLOEXEC : 0);
	if (fd < 0 || fd >= MAX_FDS) {
		saved = fd < 0 ? errno : EMFILE;
		rq.op = KSHIM_CLOSE;
		rq.id = (uint64_t)id;
		call(&rq, NULL);
		if (fd >= 0)
			real_close(fd);
		errno = saved;
		return -1;
	}
	pthread_mutex_lock(&fds_lock);
	kfds[fd] = (uint64_t)id;
	pthread_mutex_unlock(&fds_lock);
	return fd;
}

static int open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, int) : 0;
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	int mode;

	setup();
	if (is_kgpu_path(path))
		return kgpu_open(path, flags);
	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return real_openat(dirfd, path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	int mode;

	setup();
	if (is_kgpu_path(path))
		return kgpu_open(path, flags);
	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return real_openat(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));
int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

int __open64_2(const char *path, int flags) __attribute__((alias("__open_2")));

int __openat_2(int dirfd, const char *path, int flags)
{
	return openat(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags) __attribute__((alias("__openat_2")));

int close(int fd)
{
	uint64_t id;

	setup();
	id = kfile(fd);
	if (id) {
		struct kshim_req rq = { .op = KSHIM_CLOSE, .id = id };

		pthread_mutex_lock(&fds_lock);
		kfds[fd] = 0;
		pthread_mutex_unlock(&fds_lock);
		call(&rq, NULL);
	}
	return real_close(fd);
}

int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	void *arg;
	uint64_t id;

	setup();
	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	id = kfile(fd);
	if (id) {
		struct kshim_req rq = {
			.op = KSHIM_IOCTL, .id = id, .a = (uint32_t)request, .b = (uint64_t)arg
		};

		return (int)result(call(&rq, NULL));
	}
	return real_ioctl(fd, request, arg);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
	uint64_t id;

	setup();
	id = kfile(fd);
	if (id) {
		struct kshim_req rq = {
			.op = KSHIM_MMAP,
			.id = id,
			.a = len,
			.b = (uint32_t)prot | (uint64_t)(uint32_t)flags << 32,
			.c = (uint64_t)offset,
		};
		int memfd = -1, saved;
		int64_t ret = call(&rq, &memfd);
		void *p;

		if (ret < 0 || memfd < 0) {
			errno = ret < 0 ? (int)-ret : EINVAL;
			return MAP_FAILED;
		}
		p = real_mmap(addr, len, prot, flags, memfd, (off_t)rq.c);
		saved = errno;
		real_close(memfd);
		errno = saved;
		return p;
	}
	return real_mmap(addr, len, prot, flags, fd, offset);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
	__attribute__((alias("mmap")));

static int poll_kgpu(struct pollfd *p, uint64_t id, int timeout)
{
	struct kshim_req rq = {
		.op = KSHIM_POLL, .id = id, .a = (uint16_t)p->events, .b = (uint64_t)(int64_t)timeout
	};
	int64_t ret = call(&rq, NULL);

	p->revents = ret < 0 ? POLLERR : (short)ret;
	return ret < 0 ? (int)ret : 0;
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct timespec start;
	nfds_t i, nk = 0;

	setup();
	for (i = 0; i < nfds; i++)
		nk += kfile(fds[i].fd) != 0;
	if (nk == 0)
		return real_poll(fds, nfds, timeout);
	if (nfds == 1) { /* the common case: the kernel process sleeps for us */
		int r = poll_kgpu(&fds[0], kfile(fds[0].fd), timeout);

		if (r < 0) {
			errno = -r;
			return -1;
		}
		return fds[0].revents ? 1 : 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) { /* a mixed set: look at every descriptor, then sleep 1 ms */
		struct timespec now, ms = { 0, 1000000 };
		int ready = 0;

		for (i = 0; i < nfds; i++) {
			uint64_t id = kfile(fds[i].fd);

			if (id)
				poll_kgpu(&fds[i], id, 0);
			else if (real_poll(&fds[i], 1, 0) < 0)
				return -1;
			ready += fds[i].revents != 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (ready || timeout == 0 ||
		    (timeout > 0 && (now.tv_sec - start.tv_sec) * 1000 +
					    (now.tv_nsec - start.tv_nsec) / 1000000 >= timeout))
			return ready;
		nanosleep(&ms, NULL);
	}
}
