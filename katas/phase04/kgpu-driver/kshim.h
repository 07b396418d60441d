/* GIVEN: a small Linux kernel API in user space (see kgpu_kernel.h). Do not edit.
 *
 * kshim.c runs your driver in a "kernel" process of its own: user programs talk to it through
 * kgpu_preload.c (LD_PRELOAD), their pointers are really in another address space (copy_*_user
 * reads and writes them with process_vm_readv/writev and fail on bad ones, as the kernel's do),
 * and the memory you vmalloc_user() and remap_vmalloc_range() is really shared with them.
 * The semantics follow the kernel's; what differs is said next to it.
 */
#ifndef KSHIM_H
#define KSHIM_H

#include <errno.h>
#include <limits.h>
#include <linux/types.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ types and annotations */
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;
typedef unsigned int fmode_t;
typedef unsigned int __poll_t;
typedef unsigned int gfp_t;
typedef long long loff_t_k;
#define __user
#define __iomem
#define __init
#define __exit
#define __must_check __attribute__((warn_unused_result))
#define THIS_MODULE ((struct module *)0)
#define GFP_KERNEL 0u
#define GFP_ATOMIC 1u
#define PAGE_SIZE 4096UL
#define PAGE_SHIFT 12
#define PAGE_ALIGN(x) (((x) + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1))
#define ERESTARTSYS 512 /* kernel-internal: "interrupted, restart the call" */
#ifndef ETIME
#define ETIME 62
#endif
#define IS_ERR_VALUE(x) ((unsigned long)(void *)(x) >= (unsigned long)-4095)
static inline void *ERR_PTR(long error) { return (void *)error; }
static inline long PTR_ERR(const void *ptr) { return (long)ptr; }
static inline bool IS_ERR(const void *ptr) { return IS_ERR_VALUE((unsigned long)ptr); }
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define min_t(t, a, b) ((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b) ((t)(a) > (t)(b) ? (t)(a) : (t)(b))
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define WARN_ON(c) kshim_warn_on(!!(c), #c, __FILE__, __LINE__)
#define BUG_ON(c) ((c) ? kshim_bug(#c, __FILE__, __LINE__) : (void)0)

/* ------------------------------------------------------------------ ioctl numbers */
/* _IO, _IOR, _IOW, _IOWR, _IOC_NR, _IOC_TYPE, _IOC_SIZE, _IOC_DIR: from <linux/ioctl.h> */
#include <linux/ioctl.h>

/* ------------------------------------------------------------------ printk */
#define KERN_ERR "<3>"
#define KERN_WARNING "<4>"
#define KERN_INFO "<6>"
#define KERN_DEBUG "<7>"
int printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define pr_err(fmt, ...) printk(KERN_ERR fmt, ##__VA_ARGS__)
#define pr_warn(fmt, ...) printk(KERN_WARNING fmt, ##__VA_ARGS__)
#define pr_info(fmt, ...) printk(KERN_INFO fmt, ##__VA_ARGS__)
#define pr_debug(fmt, ...) ((void)0)
int kshim_warn_on(int cond, const char *what, const char *file, int line);
void kshim_bug(const char *what, const char *file, int line) __attribute__((noreturn));

/* ------------------------------------------------------------------ memory */
/* Every allocation is counted: memory still allocated when the module is unloaded is a leak.
 * libc's malloc, calloc ... called by the driver are counted too (and reported: not a kernel
 * allocator). kfree and vfree of memory a bound GPU channel still uses (its ring, its memory,
 * its interrupt cookie) are reported as a use after free; kfree poisons what it frees. */
void *kmalloc(size_t size, gfp_t flags);
void *kzalloc(size_t size, gfp_t flags);
void *kcalloc(size_t n, size_t size, gfp_t flags);
void kfree(const void *p);
/* Zeroed, page-aligned memory that may be mapped into user space with remap_vmalloc_range. */
void *vmalloc_user(unsigned long size);
void *vzalloc(unsigned long size);
void vfree(const void *p);

/* ------------------------------------------------------------------ user memory */
/* Copy from/to the calling user process. Return the number of bytes NOT copied: 0 is success;
 * anything else means the user pointer was bad (return -EFAULT), even when only part of the
 * struct could be copied. The kernel process reports a call that reads the same user memory
 * twice (a double fetch: "kgpu: BUG: double fetch"). */
unsigned long __must_check copy_from_user(void *to, const void __user *from, unsigned long n);
unsigned long __must_check copy_to_user(void __user *to, const void *from, unsigned long n);
unsigned long __must_check clear_user(void __user *to, unsigned long n);
#define get_user(x, ptr)                                                                    \
	({                                                                                  \
		__typeof__(*(ptr)) __gu_v;                                                  \
		int __gu_e = copy_from_user(&__gu_v, (ptr), sizeof(__gu_v)) ? -EFAULT : 0; \
		(x) = __gu_e ? (__typeof__(*(ptr)))0 : __gu_v;                              \
		__gu_e;                                                                     \
	})
#define put_user(x, ptr)                                                                   \
	({                                                                                 \
		__typeof__(*(ptr)) __pu_v = (x);                                           \
		copy_to_user((ptr), &__pu_v, sizeof(__pu_v)) ? -EFAULT : 0;                \
	})

/* ------------------------------------------------------------------ atomics and barriers */
typedef struct { int counter; } atomic_t;
typedef struct { s64 counter; } atomic64_t;
#define ATOMIC_INIT(i) { (i) }
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#define smp_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define smp_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
static inline int atomic_read(const atomic_t *v) { return __atomic_load_n(&v->counter, __ATOMIC_SEQ_CST); }
static inline void atomic_set(atomic_t *v, int i) { __atomic_store_n(&v->counter, i, __ATOMIC_SEQ_CST); }
static inline void atomic_inc(atomic_t *v) { __atomic_add_fetch(&v->counter, 1, __ATOMIC_SEQ_CST); }
static inline void atomic_dec(atomic_t *v) { __atomic_sub_fetch(&v->counter, 1, __ATOMIC_SEQ_CST); }
static inline int atomic_inc_return(atomic_t *v) { return __atomic_add_fetch(&v->counter, 1, __ATOMIC_SEQ_CST); }
static inline int atomic_dec_and_test(atomic_t *v) { return __atomic_sub_fetch(&v->counter, 1, __ATOMIC_SEQ_CST) == 0; }
static inline s64 atomic64_read(const atomic64_t *v) { return __atomic_load_n(&v->counter, __ATOMIC_SEQ_CST); }
static inline void atomic64_set(atomic64_t *v, s64 i) { __atomic_store_n(&v->counter, i, __ATOMIC_SEQ_CST); }
static inline s64 atomic64_inc_return(atomic64_t *v) { return __atomic_add_fetch(&v->counter, 1, __ATOMIC_SEQ_CST); }

/* ------------------------------------------------------------------ locks */
/* A mutex may sleep (never take one in the interrupt handler); a spinlock may not sleep. Both
 * are pthread mutexes here, so ThreadSanitizer sees them. A driver call (ioctl, poll) that
 * sleeps (wait_event*, msleep, usleep_range) holding one is reported ("kgpu: BUG: ... sleeps"). */
struct mutex { pthread_mutex_t m; };
void mutex_init(struct mutex *lock);
void mutex_lock(struct mutex *lock);
int __must_check mutex_lock_interruptible(struct mutex *lock); /* 0: locked */
int mutex_trylock(struct mutex *lock);                         /* 1: locked */
void mutex_unlock(struct mutex *lock);
void mutex_destroy(struct mutex *lock);
#define DEFINE_MUTEX(name) struct mutex name = { PTHREAD_MUTEX_INITIALIZER }

typedef struct { pthread_mutex_t m; } spinlock_t;
void spin_lock_init(spinlock_t *lock);
void spin_lock(spinlock_t *lock);
void spin_unlock(spinlock_t *lock);
#define spin_lock_irqsave(lock, flags) do { (flags) = 0; spin_lock(lock); } while (0)
#define spin_unlock_irqrestore(lock, flags) do { (void)(flags); spin_unlock(lock); } while (0)
#define spin_lock_irq(lock) spin_lock(lock)
#define spin_unlock_irq(lock) spin_unlock(lock)
#define DEFINE_SPINLOCK(name) spinlock_t name = { PTHREAD_MUTEX_INITIALIZER }

/* ------------------------------------------------------------------ time */
#define HZ 1000 /* one jiffy is a millisecond here (250 or 1000 on real kernels) */
#define MAX_SCHEDULE_TIMEOUT LONG_MAX
unsigned long kshim_jiffies(void);
#define jiffies kshim_jiffies()
static inline unsigned long msecs_to_jiffies(unsigned int m) { return m; }
static inline unsigned long usecs_to_jiffies(unsigned int u) { return (u + 999) / 1000; }
/* Rounded up, without wrapping: 2^64 - 1 ns is 18446744073709 jiffies, not 0. */
static inline unsigned long nsecs_to_jiffies(u64 n) { return (unsigned long)(n / 1000000 + (n % 1000000 != 0)); }
static inline unsigned int jiffies_to_msecs(unsigned long j) { return (unsigned int)j; }
#define time_after(a, b) ((long)((b) - (a)) < 0)
#define time_before(a, b) time_after(b, a)
u64 ktime_get_ns(void);
void msleep(unsigned int msecs);
void usleep_range(unsigned long min_us, unsigned long max_us);
void udelay(unsigned long usecs);
void cond_resched(void);

/* ------------------------------------------------------------------ wait queues */
/* wait_event*(wq, condition): sleep until `condition` (re-evaluated after every wake_up on wq)
 * is true. The _timeout forms take jiffies and return 0 when the time ran out with the
 * condition false, else the jiffies left (at least 1). Change the condition, then wake_up. */
typedef struct wait_queue_head {
	pthread_mutex_t m;
	pthread_cond_t c;
	unsigned long seq;
} wait_queue_head_t;
void init_waitqueue_head(wait_queue_head_t *wq);
void wake_up(wait_queue_head_t *wq);
#define wake_up_all(wq) wake_up(wq)
#define wake_up_interruptible(wq) wake_up(wq)
#define wake_up_interruptible_all(wq) wake_up(wq)
#define DECLARE_WAIT_QUEUE_HEAD(name) \
	wait_queue_head_t name = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 }
unsigned long kshim_wait_seq(wait_queue_head_t *wq);
/* Sleep until wq->seq != seq or `deadline` (kshim_jiffies(); 0: none) passes. */
void kshim_wait_change(wait_queue_head_t *wq, unsigned long seq, unsigned long deadline);
#define __kshim_wait_event(wq, condition, timeout)                                          \
	({                                                                                  \
		long __left = (long)(timeout);                                              \
		unsigned long __end = __left == MAX_SCHEDULE_TIMEOUT ? 0 : kshim_jiffies() + __left; \
		for (;;) {                                                                  \
			unsigned long __seq = kshim_wait_seq(wq);                           \
			if (condition) {                                                    \
				if (__end) {                                                \
					__left = (long)(__end - kshim_jiffies());           \
					if (__left < 1)                                     \
						__left = 1;                                 \
				}                                                           \
				break;                                                      \
			}                                                                   \
			if (__end && !time_before(kshim_jiffies(), __end)) {                \
				__left = 0;                                                 \
				break;                                                      \
			}                                                                   \
			kshim_wait_change(wq, __seq, __end);                                \
		}                                                                           \
		__left;                                                                     \
	})
#define wait_event(wq, condition) ((void)__kshim_wait_event(&(wq), condition, MAX_SCHEDULE_TIMEOUT))
/* No signals reach the kernel process here: the _interruptible forms never return -ERESTARTSYS. */
#define wait_event_interruptible(wq, condition) \
	({ (void)__kshim_wait_event(&(wq), condition, MAX_SCHEDULE_TIMEOUT); 0; })
#define wait_event_timeout(wq, condition, timeout) __kshim_wait_event(&(wq), condition, timeout)
#define wait_event_interruptible_timeout(wq, condition, timeout) \
	__kshim_wait_event(&(wq), condition, timeout)

/* The interrupt latency the tests give the simulated GPU (KGPU_IRQ_DELAY_US, default 0): how
 * long its interrupt line waits after a fence before calling the driver's handler. */
unsigned long kshim_irq_delay_us(void);

/* ------------------------------------------------------------------ kernel threads */
struct task_struct;
struct task_struct *kthread_run(int (*fn)(void *data), void *data, const char *namefmt, ...);
bool kthread_should_stop(void);
int kthread_stop(struct task_struct *task); /* wake it, wait for fn to return, its value */

/* ------------------------------------------------------------------ interrupts */
typedef enum irqreturn { IRQ_NONE = 0, IRQ_HANDLED = 1 } irqreturn_t;

/* ------------------------------------------------------------------ files */
struct module;
struct inode {
	unsigned int i_rdev; /* MKDEV(major, minor) */
};
#define MINORBITS 20
#define MAJOR(dev) ((unsigned int)((dev) >> MINORBITS))
#define MINOR(dev) ((unsigned int)((dev) & ((1U << MINORBITS) - 1)))
static inline unsigned int iminor(const struct inode *inode) { return MINOR(inode->i_rdev); }
struct file {
	void *private_data;   /* yours: set it in open, it comes back in every other call */
	const struct file_operations *f_op;
	unsigned int f_flags; /* O_RDWR, O_NONBLOCK ... as given to open() */
	fmode_t f_mode;
	struct inode *f_inode;
};
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2

#define VM_READ 0x1UL
#define VM_WRITE 0x2UL
#define VM_SHARED 0x8UL
#define VM_DONTEXPAND 0x40000UL
#define VM_DONTDUMP 0x4000000UL
struct vm_area_struct {
	unsigned long vm_start; /* the user address range being mapped */
	unsigned long vm_end;
	unsigned long vm_pgoff; /* mmap's offset, in pages */
	unsigned long vm_flags; /* VM_READ | VM_WRITE | VM_SHARED ... */
	void *vm_private_data;
	int kshim_memfd;        /* set by remap_vmalloc_range */
	unsigned long kshim_offset;
};
static inline void vm_flags_set(struct vm_area_struct *vma, unsigned long flags) { vma->vm_flags |= flags; }
/* Map vmalloc_user() memory at `addr` (+ pgoff pages) into the whole of vma. -EINVAL when vma
 * is larger than what is left of the allocation, or addr is not vmalloc_user() memory. */
int remap_vmalloc_range(struct vm_area_struct *vma, void *addr, unsigned long pgoff);

#define EPOLLIN 0x001u
#define EPOLLPRI 0x002u
#define EPOLLOUT 0x004u
#define EPOLLERR 0x008u
#define EPOLLHUP 0x010u
#define EPOLLRDNORM 0x040u
#define EPOLLWRNORM 0x100u
typedef struct poll_table_struct poll_table;
/* Register wq with this poll: a wake_up on it makes poll() call your .poll again. */
void poll_wait(struct file *file, wait_queue_head_t *wq, poll_table *pt);

struct file_operations {
	struct module *owner;
	int (*open)(struct inode *inode, struct file *file);
	int (*release)(struct inode *inode, struct file *file);
	long (*unlocked_ioctl)(struct file *file, unsigned int cmd, unsigned long arg);
	long (*compat_ioctl)(struct file *file, unsigned int cmd, unsigned long arg);
	int (*mmap)(struct file *file, struct vm_area_struct *vma);
	__poll_t (*poll)(struct file *file, poll_table *pt);
	long long (*llseek)(struct file *file, long long offset, int whence);
};
static inline long long noop_llseek(struct file *f, long long o, int w) { (void)f; (void)w; return o; }

#define MISC_DYNAMIC_MINOR 255
#define MISC_MAJOR 10
struct miscdevice {
	int minor;
	const char *name; /* the node is /dev/<name> */
	const struct file_operations *fops;
	unsigned int mode;
};
int misc_register(struct miscdevice *misc);
void misc_deregister(struct miscdevice *misc);

/* ------------------------------------------------------------------ modules */
typedef int (*kshim_initcall_t)(void);
typedef void (*kshim_exitcall_t)(void);
#define module_init(fn) kshim_initcall_t kshim_module_init = (fn)
#define module_exit(fn) kshim_exitcall_t kshim_module_exit = (fn)
#define MODULE_LICENSE(x)
#define MODULE_AUTHOR(x)
#define MODULE_DESCRIPTION(x)

#endif
