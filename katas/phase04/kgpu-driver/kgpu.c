/* kgpu: a character-device driver for the simulated kgpu GPU. YOU WRITE THIS FILE.
 *
 * One open is one context: its own command ring and memory (vmalloc_user, mapped by user
 * space), its own hardware channel (kgpu_hw_bind), its own fences. SUBMIT is the doorbell;
 * the GPU's interrupt handler records completed fences and wakes the waiters; WAIT sleeps.
 * kgpu_uapi.h says what user space expects, kgpu_hw.h what the GPU does, kgpu_kernel.h which
 * kernel functions you have. Every function below that returns KGPU_TODO is yours; the tests
 * show a task as "not started" while one of its calls answers KGPU_TODO.
 */
#include "kgpu_kernel.h"
#include "kgpu_hw.h"
#include "kgpu_uapi.h"

#define KGPU_MEM_BYTES (KGPU_RING_BYTES + KGPU_VRAM_BYTES) /* ring, then the context's memory */

struct kgpu_ctx {
	/* TODO: what one open needs: a lock, a wait queue, the memory, the channel, the context
	 * id, the ring's put, the last fence submitted and the last one completed ... */
	struct kgpu_hw_channel *ch;
};

static struct kgpu_hw *hw;

/* The GPU's interrupt (kgpu_hw.h): a fence of the context `cookie` (what you gave
 * kgpu_hw_bind) completed. Runs on the interrupt thread: never sleep or take a mutex here. */
static void kgpu_irq(void *cookie)
{
	(void)cookie; /* TODO: record kgpu_hw_completed(), wake the waiters */
}

static int kgpu_open(struct inode *inode, struct file *file)
{
	(void)inode;
	(void)file;
	return KGPU_TODO; /* TODO: a new context in file->private_data */
}

static int kgpu_release(struct inode *inode, struct file *file)
{
	(void)inode;
	(void)file;
	return KGPU_TODO; /* TODO: unbind the channel, free everything open allocated */
}

static long kgpu_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	(void)file;
	(void)cmd;
	(void)arg;
	return KGPU_TODO; /* TODO: INFO, SET_PARAM, GET_PARAM, SUBMIT, WAIT; else -ENOTTY */
}

static int kgpu_mmap(struct file *file, struct vm_area_struct *vma)
{
	(void)file;
	(void)vma;
	return KGPU_TODO; /* TODO: remap_vmalloc_range of the context's memory */
}

static __poll_t kgpu_poll(struct file *file, poll_table *pt)
{
	(void)file;
	(void)pt;
	return (__poll_t)KGPU_TODO; /* TODO: poll_wait, then EPOLLIN when idle, EPOLLOUT when room */
}

/* Given: the device's registration, as in every misc driver. */
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
