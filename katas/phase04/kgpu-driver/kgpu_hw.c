/* GIVEN: the simulated kgpu GPU (see kgpu_hw.h). Do not edit.
 *
 * Written against the kernel API like the driver, so it builds both as a real module and for
 * the tests. Two kernel threads play the hardware: the engine, which runs commands, and the
 * interrupt line, which calls the driver's handler for every channel with a finished fence.
 */
#include "kgpu_hw.h"

#define KGPU_HW_CHANNELS 64
#define KGPU_HW_FIFO (KGPU_RING_ENTRIES + 1) /* GPFIFO entries: each covers >= 1 command */
#define KGPU_HW_MAX_DELAY_US 10000000ULL
#ifdef __KERNEL__
#define kgpu_hw_irq_delay_us() 0UL
#else
#define kgpu_hw_irq_delay_us() kshim_irq_delay_us() /* the tests' interrupt latency */
#endif

struct kgpu_hw_channel {
	struct kgpu_hw *hw;
	struct kgpu_cmd *ring;
	u8 *vram;
	void *cookie;
	int id;
	u32 get;         /* next command to read */
	u32 last_put;    /* the last doorbell's put */
	u64 last_fence;  /* the last doorbell's fence */
	u64 completed;   /* the completion register */
	u32 fifo_put[KGPU_HW_FIFO];
	u64 fifo_fence[KGPU_HW_FIFO];
	unsigned int head, tail; /* fifo[head..tail) are pending doorbells */
	u64 busy_until_ns;
	bool hung, error, irq_pending;
};

struct kgpu_hw {
	spinlock_t lock;
	wait_queue_head_t engine_wq, irq_wq, idle_wq;
	struct kgpu_hw_channel *channels[KGPU_HW_CHANNELS];
	struct kgpu_hw_channel *in_irq;  /* the driver's handler is running for it */
	unsigned long kicks, irqs;       /* bumped by doorbells and by fences */
	unsigned int next;               /* round robin */
	int next_id;
	struct task_struct *engine, *irq_thread;
	kgpu_irq_fn irq;
};

#ifndef __KERNEL__
/* The devices, for kgpu_hw_in_use: the kernel shim asks it before kfree and vfree. */
#define KGPU_HW_DEVICES 4
static struct kgpu_hw *kgpu_hw_devices[KGPU_HW_DEVICES];
static DEFINE_SPINLOCK(kgpu_hw_devices_lock);
#endif

static void channel_error(struct kgpu_hw_channel *ch, const char *what)
{
	ch->error = true;
	pr_err("kgpu-hw: channel %d: %s: channel stopped (Xid 13)\n", ch->id, what);
}

/* One command of ch at ch->get, under hw->lock (commands are short). */
static void execute(struct kgpu_hw_channel *ch, const struct kgpu_cmd *cmd, u64 now)
{
	switch (cmd->op) {
	case KGPU_OP_NOP:
		break;
	case KGPU_OP_FILL:
		if (cmd->a > KGPU_VRAM_BYTES || cmd->len > KGPU_VRAM_BYTES - cmd->a) {
			channel_error(ch, "FILL outside the channel's memory");
			return;
		}
		memset(ch->vram + cmd->a, (int)(cmd->b & 0xff), cmd->len);
		break;
	case KGPU_OP_DELAY:
		ch->busy_until_ns = now + min_t(u64, cmd->a, KGPU_HW_MAX_DELAY_US) * 1000;
		break;
	case KGPU_OP_INC:
		if (cmd->a > KGPU_VRAM_BYTES - 8 || (cmd->a & 7)) {
			channel_error(ch, "INC outside the channel's memory or unaligned");
			return;
		}
		(*(u64 *)(ch->vram + cmd->a))++;
		break;
	case KGPU_OP_HANG:
		ch->hung = true; /* GET stays on this command for ever */
		return;
	default:
		channel_error(ch, "unknown command");
		return;
	}
	WRITE_ONCE(ch->get, (ch->get + 1) % KGPU_RING_ENTRIES);
}

/* The runnable channel after hw->next (round robin); completes finished fences on the way. */
static struct kgpu_hw_channel *pick(struct kgpu_hw *hw, u64 now, u64 *wake_ns)
{
	unsigned int i;

	for (i = 0; i < KGPU_HW_CHANNELS; i++) {
		unsigned int slot = (hw->next + i) % KGPU_HW_CHANNELS;
		struct kgpu_hw_channel *ch = hw->channels[slot];

		if (!ch || ch->error || ch->hung || ch->head == ch->tail)
			continue;
		if (ch->busy_until_ns > now) {
			if (!*wake_ns || ch->busy_until_ns < *wake_ns)
				*wake_ns = ch->busy_until_ns;
			continue;
		}
		if (ch->get == ch->fifo_put[ch->head]) { /* a doorbell's commands are done */
			smp_wmb(); /* their results before the fence */
			WRITE_ONCE(ch->completed, ch->fifo_fence[ch->head]);
			ch->head = (ch->head + 1) % KGPU_HW_FIFO;
			ch->irq_pending = true;
			WRITE_ONCE(hw->irqs, hw->irqs + 1);
			wake_up(&hw->irq_wq);
			if (ch->head == ch->tail)
				continue;
		}
		hw->next = (slot + 1) % KGPU_HW_CHANNELS;
		return ch;
	}
	return NULL;
}

static int engine_thread(void *data)
{
	struct kgpu_hw *hw = data;

	while (!kthread_should_stop()) {
		struct kgpu_hw_channel *ch;
		struct kgpu_cmd cmd;
		unsigned long kicks;
		u64 now = ktime_get_ns(), wake_ns = 0;

		spin_lock(&hw->lock);
		kicks = READ_ONCE(hw->kicks);
		ch = pick(hw, now, &wake_ns);
		if (ch) {
			memcpy(&cmd, &ch->ring[ch->get], sizeof(cmd)); /* user memory: read it once */
			execute(ch, &cmd, now);
		}
		spin_unlock(&hw->lock);
		if (!ch) {
			long timeout = wake_ns ? (long)nsecs_to_jiffies(wake_ns - now) : HZ;

			wait_event_interruptible_timeout(hw->engine_wq,
							 READ_ONCE(hw->kicks) != kicks ||
								 kthread_should_stop(),
							 max(timeout, 1L));
			continue;
		}
	}
	return 0;
}

static int irq_thread(void *data)
{
	struct kgpu_hw *hw = data;

	while (!kthread_should_stop()) {
		struct kgpu_hw_channel *ch = NULL;
		unsigned long irqs;
		unsigned int i;

		spin_lock(&hw->lock);
		irqs = READ_ONCE(hw->irqs);
		for (i = 0; i < KGPU_HW_CHANNELS && !ch; i++) {
			if (hw->channels[i] && hw->channels[i]->irq_pending)
				ch = hw->channels[i];
		}
		if (ch) {
			ch->irq_pending = false;
			WRITE_ONCE(hw->in_irq, ch);
		}
		spin_unlock(&hw->lock);
		if (!ch) {
			wait_event_interruptible_timeout(hw->irq_wq,
							 READ_ONCE(hw->irqs) != irqs ||
								 kthread_should_stop(),
							 HZ);
			continue;
		}
		if (kgpu_hw_irq_delay_us())
			usleep_range(kgpu_hw_irq_delay_us(), kgpu_hw_irq_delay_us());
		hw->irq(ch->cookie);
		spin_lock(&hw->lock);
		WRITE_ONCE(hw->in_irq, NULL);
		spin_unlock(&hw->lock);
		wake_up(&hw->idle_wq);
	}
	return 0;
}

struct kgpu_hw *kgpu_hw_create(kgpu_irq_fn irq)
{
	struct kgpu_hw *hw = kzalloc(sizeof(*hw), GFP_KERNEL);
#ifndef __KERNEL__
	unsigned int i;
#endif

	if (!hw)
		return NULL;
	spin_lock_init(&hw->lock);
	init_waitqueue_head(&hw->engine_wq);
	init_waitqueue_head(&hw->irq_wq);
	init_waitqueue_head(&hw->idle_wq);
	hw->irq = irq;
	hw->engine = kthread_run(engine_thread, hw, "kgpu-engine");
	if (IS_ERR(hw->engine)) {
		kfree(hw);
		return NULL;
	}
	hw->irq_thread = kthread_run(irq_thread, hw, "kgpu-irq");
	if (IS_ERR(hw->irq_thread)) {
		kthread_stop(hw->engine);
		kfree(hw);
		return NULL;
	}
#ifndef __KERNEL__
	spin_lock(&kgpu_hw_devices_lock);
	for (i = 0; i < KGPU_HW_DEVICES; i++) {
		if (!kgpu_hw_devices[i]) {
			kgpu_hw_devices[i] = hw;
			break;
		}
	}
	spin_unlock(&kgpu_hw_devices_lock);
#endif
	return hw;
}

void kgpu_hw_destroy(struct kgpu_hw *hw)
{
	unsigned int i;

	if (!hw)
		return;
#ifndef __KERNEL__
	spin_lock(&kgpu_hw_devices_lock);
	for (i = 0; i < KGPU_HW_DEVICES; i++) {
		if (kgpu_hw_devices[i] == hw)
			kgpu_hw_devices[i] = NULL;
	}
	spin_unlock(&kgpu_hw_devices_lock);
#endif
	kthread_stop(hw->engine);
	kthread_stop(hw->irq_thread);
	spin_lock(&hw->lock);
	for (i = 0; i < KGPU_HW_CHANNELS; i++) {
		if (hw->channels[i])
			pr_err("kgpu-hw: channel %d still bound at unload (a context was not released)\n",
			       hw->channels[i]->id);
	}
	spin_unlock(&hw->lock);
	kfree(hw);
}

struct kgpu_hw_channel *kgpu_hw_bind(struct kgpu_hw *hw, struct kgpu_cmd *ring, u8 *vram,
				     void *cookie)
{
	struct kgpu_hw_channel *ch = kzalloc(sizeof(*ch), GFP_KERNEL);
	unsigned int i;

	if (!ch)
		return NULL;
	ch->hw = hw;
	ch->ring = ring;
	ch->vram = vram;
	ch->cookie = cookie;
	spin_lock(&hw->lock);
	for (i = 0; i < KGPU_HW_CHANNELS; i++) {
		if (!hw->channels[i]) {
			ch->id = hw->next_id++;
			hw->channels[i] = ch;
			break;
		}
	}
	spin_unlock(&hw->lock);
	if (i == KGPU_HW_CHANNELS) {
		pr_err("kgpu-hw: all %d channels are bound\n", KGPU_HW_CHANNELS);
		kfree(ch);
		return NULL;
	}
	return ch;
}

int kgpu_hw_doorbell(struct kgpu_hw_channel *ch, u32 put, u64 fence)
{
	struct kgpu_hw *hw = ch->hw;
	u32 busy, more;
	int ret = 0;

	spin_lock(&hw->lock);
	busy = (ch->last_put + KGPU_RING_ENTRIES - ch->get) % KGPU_RING_ENTRIES;
	more = (put + KGPU_RING_ENTRIES - ch->last_put) % KGPU_RING_ENTRIES;
	if (ch->error) {
		ret = -EIO;
	} else if (put >= KGPU_RING_ENTRIES || more == 0) {
		channel_error(ch, "doorbell with no new commands");
		ret = -EIO;
	} else if (fence != ch->last_fence + 1) {
		pr_err("kgpu-hw: channel %d: fence %llu after fence %llu\n", ch->id,
		       (unsigned long long)fence, (unsigned long long)ch->last_fence);
		channel_error(ch, "doorbell out of order");
		ret = -EIO;
	} else if (busy + more >= KGPU_RING_ENTRIES) {
		channel_error(ch, "ring overflow: new commands overwrite ones not yet read");
		ret = -EIO;
	} else {
		ch->fifo_put[ch->tail] = put;
		ch->fifo_fence[ch->tail] = fence;
		ch->tail = (ch->tail + 1) % KGPU_HW_FIFO;
		ch->last_put = put;
		ch->last_fence = fence;
		WRITE_ONCE(hw->kicks, hw->kicks + 1);
	}
	spin_unlock(&hw->lock);
	wake_up(&hw->engine_wq);
	return ret;
}

u32 kgpu_hw_get(struct kgpu_hw_channel *ch)
{
	return READ_ONCE(ch->get);
}

u64 kgpu_hw_completed(struct kgpu_hw_channel *ch)
{
	u64 done = READ_ONCE(ch->completed);

	smp_rmb(); /* the fence before the results it covers */
	return done;
}

void kgpu_hw_unbind(struct kgpu_hw_channel *ch)
{
	struct kgpu_hw *hw = ch->hw;
	unsigned int i;

	spin_lock(&hw->lock);
	for (i = 0; i < KGPU_HW_CHANNELS; i++) {
		if (hw->channels[i] == ch)
			hw->channels[i] = NULL;
	}
	ch->irq_pending = false;
	spin_unlock(&hw->lock);
	wait_event(hw->idle_wq, READ_ONCE(hw->in_irq) != ch); /* its handler has returned */
	kfree(ch);
}

#ifndef __KERNEL__
static bool overlaps(const void *p, unsigned long len, const void *start, unsigned long size)
{
	const u8 *a = p, *b = start;

	return a < b + size && b < a + (len ? len : 1);
}

/* Whether [p, p + len) is still used by a bound channel: its ring, its memory or its interrupt
 * cookie. The kernel shim calls it from kfree and vfree (a free before kgpu_hw_unbind is a use
 * after free); the channel's id, or -1. */
int kgpu_hw_in_use(const void *p, unsigned long len, const char **what)
{
	int found = -1;
	unsigned int d, i;

	spin_lock(&kgpu_hw_devices_lock);
	for (d = 0; d < KGPU_HW_DEVICES && found < 0; d++) {
		struct kgpu_hw *hw = kgpu_hw_devices[d];

		if (!hw)
			continue;
		spin_lock(&hw->lock);
		for (i = 0; i < KGPU_HW_CHANNELS && found < 0; i++) {
			struct kgpu_hw_channel *ch = hw->channels[i];

			if (!ch)
				continue;
			if (overlaps(p, len, ch->ring, KGPU_RING_BYTES))
				*what = "the ring";
			else if (overlaps(p, len, ch->vram, KGPU_VRAM_BYTES))
				*what = "the memory";
			else if (ch->cookie && overlaps(p, len, ch->cookie, 1))
				*what = "the interrupt cookie (the handler's argument)";
			else
				continue;
			found = ch->id;
		}
		spin_unlock(&hw->lock);
	}
	spin_unlock(&kgpu_hw_devices_lock);
	return found;
}
#endif
