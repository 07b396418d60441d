/* kgpu: SHORTCUT poll-msleep: WAIT looks at the completed fence every millisecond (msleep) instead of sleeping on the wait queue
 *
 *
 * One open is one context: its own command ring and memory (one vmalloc_user area that user
 * space maps), its own hardware channel, its own fences. SUBMIT is the doorbell: it hands the
 * commands written since the last doorbell to the GPU with the next fence number. The GPU's
 * interrupt handler records the completed fence and wakes the waiters; WAIT sleeps on that.
 */
#include "kgpu_kernel.h"
#include "kgpu_hw.h"
#include "kgpu_uapi.h"

#define KGPU_MEM_BYTES (KGPU_RING_BYTES + KGPU_VRAM_BYTES)

struct kgpu_ctx {
	struct mutex lock; /* orders SUBMITs: choose the fence, ring the doorbell */
	wait_queue_head_t wq; /* woken by the interrupt handler */
	u8 *mem;              /* the ring, then the context's memory */
	struct kgpu_hw_channel *ch;
	u32 id;
	u32 put;       /* the last doorbell's put (under lock; WRITE_ONCE for poll) */
	u32 priority;  /* under lock */
	u64 submitted; /* the last fence handed out (under lock; WRITE_ONCE for WAIT/poll) */
	u64 completed; /* the last fence the GPU completed (the interrupt handler writes it) */
};

static struct kgpu_hw *hw;
static atomic_t next_ctx_id = ATOMIC_INIT(0);

/* The GPU's interrupt: a fence of ctx completed. Runs on the interrupt thread: never sleep. */
static void kgpu_irq(void *cookie)
{
	struct kgpu_ctx *ctx = cookie;

	WRITE_ONCE(ctx->completed, kgpu_hw_completed(ctx->ch));
	wake_up_all(&ctx->wq);
}

static int kgpu_open(struct inode *inode, struct file *file)
{
	struct kgpu_ctx *ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);

	(void)inode;
	if (!ctx)
		return -ENOMEM;
	ctx->mem = vmalloc_user(KGPU_MEM_BYTES);
	if (!ctx->mem) {
		kfree(ctx);
		return -ENOMEM;
	}
	mutex_init(&ctx->lock);
	init_waitqueue_head(&ctx->wq);
	ctx->priority = 1;
	ctx->id = (u32)atomic_inc_return(&next_ctx_id);
	ctx->ch = kgpu_hw_bind(hw, (struct kgpu_cmd *)ctx->mem, ctx->mem + KGPU_RING_BYTES, ctx);
	if (!ctx->ch) {
		vfree(ctx->mem);
		kfree(ctx);
		return -EBUSY;
	}
	file->private_data = ctx;
	return 0;
}

static int kgpu_release(struct inode *inode, struct file *file)
{
	struct kgpu_ctx *ctx = file->private_data;

	(void)inode;
	kgpu_hw_unbind(ctx->ch); /* stops even a hung channel; no interrupt for ctx after this */
	vfree(ctx->mem);          /* user mappings keep their pages until munmap */
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return 0;
}

static long kgpu_info(struct kgpu_ctx *ctx, void __user *uarg)
{
	struct kgpu_info info = {
		.version = KGPU_VERSION,
		.ring_entries = KGPU_RING_ENTRIES,
		.vram_bytes = KGPU_VRAM_BYTES,
		.ctx_id = ctx->id,
	};

	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long kgpu_set_param(struct kgpu_ctx *ctx, void __user *uarg)
{
	struct kgpu_param p;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.pad || p.param != KGPU_PARAM_PRIORITY || p.value > 3)
		return -EINVAL; /* SUBMITTED and COMPLETED are read-only */
	mutex_lock(&ctx->lock);
	ctx->priority = (u32)p.value;
	mutex_unlock(&ctx->lock);
	return 0;
}

static long kgpu_get_param(struct kgpu_ctx *ctx, void __user *uarg)
{
	struct kgpu_param p;

	if (copy_from_user(&p, uarg, sizeof(p)))
		return -EFAULT;
	if (p.pad)
		return -EINVAL;
	mutex_lock(&ctx->lock);
	switch (p.param) {
	case KGPU_PARAM_PRIORITY:
		p.value = ctx->priority;
		break;
	case KGPU_PARAM_SUBMITTED:
		p.value = ctx->submitted;
		break;
	case KGPU_PARAM_COMPLETED:
		p.value = READ_ONCE(ctx->completed);
		break;
	default:
		mutex_unlock(&ctx->lock);
		return -EINVAL;
	}
	mutex_unlock(&ctx->lock);
	return copy_to_user(uarg, &p, sizeof(p)) ? -EFAULT : 0;
}

static long kgpu_submit(struct kgpu_ctx *ctx, void __user *uarg)
{
	struct kgpu_submit s;
	u32 busy, put;
	u64 fence = 0;
	int ret;

	if (copy_from_user(&s, uarg, sizeof(s)))
		return -EFAULT;
	if (s.flags || s.count == 0 || s.count >= KGPU_RING_ENTRIES)
		return -EINVAL;
	mutex_lock(&ctx->lock);
	busy = (ctx->put + KGPU_RING_ENTRIES - kgpu_hw_get(ctx->ch)) % KGPU_RING_ENTRIES;
	if (busy + s.count >= KGPU_RING_ENTRIES) {
		ret = -EBUSY; /* would pass commands the GPU has not read yet: WAIT first */
	} else {
		put = (ctx->put + s.count) % KGPU_RING_ENTRIES;
		fence = ctx->submitted + 1;
		ret = kgpu_hw_doorbell(ctx->ch, put, fence);
		if (ret == 0) {
			WRITE_ONCE(ctx->submitted, fence);
			WRITE_ONCE(ctx->put, put);
		}
	}
	mutex_unlock(&ctx->lock);
	if (ret)
		return ret;
	s.fence = fence;
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

static long kgpu_wait(struct kgpu_ctx *ctx, void __user *uarg)
{
	struct kgpu_wait w;
	unsigned long timeout;
	long left;

	if (copy_from_user(&w, uarg, sizeof(w)))
		return -EFAULT;
	if (w.fence > READ_ONCE(ctx->submitted))
		return -EINVAL; /* never submitted: it would never complete */
	timeout = nsecs_to_jiffies(w.timeout_ns);
	if (timeout >= MAX_SCHEDULE_TIMEOUT / 2)
		timeout = MAX_SCHEDULE_TIMEOUT;
	if (READ_ONCE(ctx->completed) >= w.fence)
		return 0;
	if (timeout == 0)
		return -ETIME;
	{
		u64 end = ktime_get_ns() + w.timeout_ns;

		while (READ_ONCE(ctx->completed) < w.fence) { /* poll every millisecond */
			if (timeout != MAX_SCHEDULE_TIMEOUT && ktime_get_ns() >= end)
				return -ETIME;
			msleep(1);
		}
	}
	(void)left;
	return 0;
}

static long kgpu_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct kgpu_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) { /* the whole number: a wrong size or direction is an unknown command */
	case KGPU_IOC_INFO:
		return kgpu_info(ctx, uarg);
	case KGPU_IOC_SET_PARAM:
		return kgpu_set_param(ctx, uarg);
	case KGPU_IOC_GET_PARAM:
		return kgpu_get_param(ctx, uarg);
	case KGPU_IOC_SUBMIT:
		return kgpu_submit(ctx, uarg);
	case KGPU_IOC_WAIT:
		return kgpu_wait(ctx, uarg);
	default:
		return -ENOTTY;
	}
}

static int kgpu_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct kgpu_ctx *ctx = file->private_data;
	unsigned long size = vma->vm_end - vma->vm_start;
	unsigned long offset = vma->vm_pgoff << PAGE_SHIFT;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL; /* a private copy would never reach the GPU */
	if (offset >= KGPU_MEM_BYTES || size > KGPU_MEM_BYTES - offset)
		return -EINVAL;
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	return remap_vmalloc_range(vma, ctx->mem, vma->vm_pgoff);
}

static __poll_t kgpu_poll(struct file *file, poll_table *pt)
{
	struct kgpu_ctx *ctx = file->private_data;
	u32 busy = (READ_ONCE(ctx->put) + KGPU_RING_ENTRIES - kgpu_hw_get(ctx->ch)) %
		   KGPU_RING_ENTRIES;
	__poll_t mask = 0;

	poll_wait(file, &ctx->wq, pt);
	if (READ_ONCE(ctx->completed) >= READ_ONCE(ctx->submitted))
		mask |= EPOLLIN | EPOLLRDNORM; /* idle: every fence completed */
	if (busy + 1 < KGPU_RING_ENTRIES)
		mask |= EPOLLOUT | EPOLLWRNORM; /* room for a command */
	return mask;
}

static const struct file_operations kgpu_fops = {
	.owner = THIS_MODULE,
	.open = kgpu_open,
	.release = kgpu_release,
	.unlocked_ioctl = kgpu_ioctl,
	.mmap = kgpu_mmap,
	.poll = kgpu_poll,
	.llseek = noop_llseek,
};

static struct miscdevice kgpu_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kgpu0",
	.fops = &kgpu_fops,
};

static int __init kgpu_init(void)
{
	int ret;

	hw = kgpu_hw_create(kgpu_irq);
	if (!hw)
		return -ENOMEM;
	ret = misc_register(&kgpu_misc);
	if (ret)
		kgpu_hw_destroy(hw);
	return ret;
}

static void __exit kgpu_exit(void)
{
	misc_deregister(&kgpu_misc);
	kgpu_hw_destroy(hw);
}

module_init(kgpu_init);
module_exit(kgpu_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kgpu: command submission to a simulated GPU");
