/* GIVEN: the kernel API kgpu.c and kgpu_hw.c use. Do not edit.
 *
 * Built as a real module (Kbuild defines __KERNEL__), this is the kernel's own headers. Built for
 * the tests, it is kshim.h: the same names and signatures, implemented in user space by kshim.c,
 * a small "kernel" process that user programs reach through kgpu_preload.c. Use only what is
 * listed here and your driver builds both ways.
 */
#ifndef KGPU_KERNEL_H
#define KGPU_KERNEL_H

#ifdef __KERNEL__
#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/errno.h>
#include <linux/fs.h>
#include <linux/interrupt.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/version.h>
#include <linux/wait.h>
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0) /* vm_flags became read-only in 6.3 */
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}
#endif
#else
#include "kshim.h"
#endif

/* What a stub returns: the tests show the task as not started. */
#define KGPU_TODO (-4000)

#endif
