/* GIVEN: the kgpu device's user-space API (what include/uapi/ is to a real driver). Do not edit.
 *
 * User programs (the "UMD") and the driver (kgpu.c, the "KMD") both include this file.
 *
 *   fd = open("/dev/kgpu0", O_RDWR)       a new context: its own ring, memory and fences
 *   ioctl(fd, KGPU_IOC_INFO, &info)        what the device offers, and this context's id
 *   ioctl(fd, KGPU_IOC_SET_PARAM, &p)      per-context parameters (priority)
 *   ring = mmap(.., KGPU_RING_BYTES, .., fd, KGPU_MMAP_RING)   the command ring (pushbuffer)
 *   vram = mmap(.., KGPU_VRAM_BYTES, .., fd, KGPU_MMAP_VRAM)   the context's memory
 *   ring[i] = cmd ...                      write commands after the ones submitted so far
 *                                          (index 0 first, wrapping at KGPU_RING_ENTRIES)
 *   ioctl(fd, KGPU_IOC_SUBMIT, &s)         the doorbell: the next s.count commands go to the
 *                                          GPU; s.fence comes back (1, 2, 3 ... per context)
 *   ioctl(fd, KGPU_IOC_WAIT, &w)           sleep until fence w.fence completed or w.timeout_ns
 *                                          passed (-1 with errno ETIME)
 *   poll(fd, POLLIN)                       readable when every submitted fence has completed
 */
#ifndef KGPU_UAPI_H
#define KGPU_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KGPU_VERSION 1
#define KGPU_RING_ENTRIES 256 /* commands in a context's ring */
#define KGPU_RING_BYTES (KGPU_RING_ENTRIES * 32)
#define KGPU_VRAM_BYTES (64 * 1024) /* a context's memory, written by FILL and INC */
#define KGPU_MMAP_RING 0                  /* mmap offset of the ring */
#define KGPU_MMAP_VRAM KGPU_RING_BYTES    /* mmap offset of the memory (page aligned) */

/* One command of the ring: 32 bytes. */
struct kgpu_cmd {
	__u32 op;  /* KGPU_OP_* */
	__u32 len; /* FILL: bytes */
	__u64 a;   /* FILL, INC: offset in the context's memory; DELAY: microseconds */
	__u64 b;   /* FILL: the byte value */
	__u64 c;   /* unused, 0 */
};

#define KGPU_OP_NOP 0
#define KGPU_OP_FILL 1  /* memset(vram + a, b, len) */
#define KGPU_OP_DELAY 2 /* the engine is busy on this context for a microseconds */
#define KGPU_OP_INC 3   /* (*(__u64 *)(vram + a))++ : counts how often a command ran */
#define KGPU_OP_HANG 4  /* the context's engine never finishes this command: a hung GPU */

struct kgpu_info {
	__u32 version;      /* KGPU_VERSION */
	__u32 ring_entries; /* KGPU_RING_ENTRIES */
	__u32 vram_bytes;   /* KGPU_VRAM_BYTES */
	__u32 ctx_id;       /* this open's context: 1, 2, 3 ... in open order, never reused */
};

struct kgpu_param {
	__u32 param; /* KGPU_PARAM_* */
	__u32 pad;   /* 0 */
	__u64 value;
};

#define KGPU_PARAM_PRIORITY 0  /* read/write, 0 (lowest) .. 3 (highest); 1 after open */
#define KGPU_PARAM_SUBMITTED 1 /* read-only: the last fence SUBMIT returned (0: none) */
#define KGPU_PARAM_COMPLETED 2 /* read-only: the last fence the GPU completed */

struct kgpu_submit {
	__u32 count; /* in: commands after the last submitted one, 1 .. KGPU_RING_ENTRIES - 1 */
	__u32 flags; /* in: 0 */
	__u64 fence; /* out: this submission's fence number */
};

struct kgpu_wait {
	__u64 fence;      /* wait for this fence (<= the last one submitted) */
	__u64 timeout_ns; /* give up after this long: -1, errno ETIME */
};

#define KGPU_IOC_MAGIC 'G'
#define KGPU_IOC_INFO _IOR(KGPU_IOC_MAGIC, 0x00, struct kgpu_info)
#define KGPU_IOC_SET_PARAM _IOW(KGPU_IOC_MAGIC, 0x01, struct kgpu_param)
#define KGPU_IOC_GET_PARAM _IOWR(KGPU_IOC_MAGIC, 0x02, struct kgpu_param)
#define KGPU_IOC_SUBMIT _IOWR(KGPU_IOC_MAGIC, 0x03, struct kgpu_submit)
#define KGPU_IOC_WAIT _IOW(KGPU_IOC_MAGIC, 0x04, struct kgpu_wait)

#endif
