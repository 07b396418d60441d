/* GIVEN: the simulated kgpu GPU, as its driver sees it. Do not edit.
 *
 * The hardware has one engine that runs the commands of every bound channel (one channel per
 * context), a command at a time, switching between channels (time slicing), and an interrupt
 * line. A channel reads its commands from a ring (the pushbuffer) in memory the driver
 * allocated, and writes FILL/INC results into the channel's memory.
 *
 *   ch = kgpu_hw_bind(hw, ring, vram, cookie)   a channel on that ring and memory
 *   kgpu_hw_doorbell(ch, put, fence)            ring the doorbell: the engine will run the
 *                                               commands from where the last doorbell stopped
 *                                               up to `put`, then write `fence` into the
 *                                               channel's completion register and raise the
 *                                               interrupt: irq(cookie) on the interrupt thread
 *   kgpu_hw_get(ch)                             GET: the index of the next command the engine
 *                                               reads; every command before it has finished
 *   kgpu_hw_completed(ch)                       the last fence written (0: none yet)
 *   kgpu_hw_unbind(ch)                          stop the channel, even a hung one, and drop
 *                                               its work; afterwards the engine and the
 *                                               interrupt thread never touch ring, vram,
 *                                               ch or cookie again
 *
 * Doorbells of one channel must come in order: `fence` one more than the last, `put` past the
 * last put. The hardware checks, and a channel that gets a doorbell out of order stops with an
 * error (printed by the kernel, as a real GPU reports an Xid): take a lock around "choose the
 * fence, ring the doorbell".
 */
#ifndef KGPU_HW_H
#define KGPU_HW_H

#include "kgpu_kernel.h"
#include "kgpu_uapi.h"

struct kgpu_hw;
struct kgpu_hw_channel;

typedef void (*kgpu_irq_fn)(void *cookie);

/* The device: its engine and interrupt threads. NULL when out of memory. */
struct kgpu_hw *kgpu_hw_create(kgpu_irq_fn irq);
void kgpu_hw_destroy(struct kgpu_hw *hw); /* every channel must be unbound before */

struct kgpu_hw_channel *kgpu_hw_bind(struct kgpu_hw *hw, struct kgpu_cmd *ring, u8 *vram,
				     void *cookie);
int kgpu_hw_doorbell(struct kgpu_hw_channel *ch, u32 put, u64 fence); /* 0, or -EIO */
u32 kgpu_hw_get(struct kgpu_hw_channel *ch);
u64 kgpu_hw_completed(struct kgpu_hw_channel *ch);
void kgpu_hw_unbind(struct kgpu_hw_channel *ch);

#endif
