/* GIVEN: the messages between kgpu_preload.c (in user programs) and kshim.c (the kernel
 * process). Do not edit. One request, one reply, over a unix socket; MMAP's reply carries the
 * memory's file descriptor (SCM_RIGHTS). */
#ifndef KSHIM_PROTO_H
#define KSHIM_PROTO_H

#include <stdint.h>

enum kshim_op {
	KSHIM_HELLO = 1, /* a per-thread connection */
	KSHIM_ANCHOR,    /* the process's first connection: its end is the process's exit */
	KSHIM_OPEN,      /* name, a = flags -> ret = file id */
	KSHIM_DUP,       /* id: a forked child holds the file too */
	KSHIM_CLOSE,     /* id */
	KSHIM_IOCTL,     /* id, a = cmd, b = arg */
	KSHIM_MMAP,      /* id, a = length, b = prot | flags << 32, c = offset -> fd, a = its offset */
	KSHIM_POLL,      /* id, a = events, b = timeout in ms (-1: none) -> ret = revents */
};

struct kshim_req {
	uint32_t op;
	uint32_t pad;
	uint64_t id;
	uint64_t a, b, c;
	char name[64];
};

struct kshim_rep {
	int64_t ret; /* >= 0, or -errno */
	uint64_t a;
};

#define KSHIM_SOCKET_ENV "KGPU_SOCKET" /* the abstract unix socket's name */

#endif
