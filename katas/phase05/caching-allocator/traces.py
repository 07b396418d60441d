"""GIVEN: allocation traces, the way PyTorch programs call the allocator (deterministic).

A trace is a numpy array of OP_DTYPE rows, replayed inside Rust by `Allocator.replay`:
(kind, stream, id, size) with kind one of alloc.OPS; `id` numbers the allocations 0, 1, 2 ...
in the order of their malloc, and free / record_stream name the allocation by that id.

- "training": a transformer's training steps: weights and Adam state once, then per step the
  forward pass keeps activations per layer, the backward pass frees them in reverse while it
  makes gradients. After the first step everything should come from the cache.
- "inference": batches of requests of random lengths (PyTorch eager inference with dynamic
  shapes): activation sizes change every batch, the case splitting and best fit are for.
- "side-stream": a copy stream (1) prefetches each batch while stream 0 computes; buffers are
  allocated on stream 1, record_stream'ed on stream 0 and freed early (the data-loader pattern).
- "tight": "inference" on a device of 1.5 GiB: the cache must be freed and the malloc retried.
- "churn": 5 000 small live tensors and 40 000 random mallocs and frees among them (speed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

MiB = 1 << 20
GiB = 1 << 30
OP_DTYPE = np.dtype([("kind", "<u4"), ("stream", "<u4"), ("id", "<u8"), ("size", "<u8")])
MALLOC, FREE, RECORD_STREAM, LAUNCH, COMPLETE, EMPTY_CACHE, SYNCHRONIZE = range(7)


@dataclass
class Trace:
    name: str
    capacity: int  # the device's, in bytes
    ops: np.ndarray

    def __len__(self) -> int:
        return len(self.ops)


class _Writer:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int]] = []
        self.next_id = 0

    def malloc(self, size: int, stream: int = 0) -> int:
        i = self.next_id
        self.next_id += 1
        self.rows.append((MALLOC, stream, i, size))
        return i

    def free(self, i: int) -> None:
        self.rows.append((FREE, 0, i, 0))

    def op(self, kind: int, stream: int = 0, i: int = 0) -> None:
        self.rows.append((kind, stream, i, 0))

    def array(self) -> np.ndarray:
        return np.array(self.rows, dtype=OP_DTYPE)


def training(steps: int = 4, layers: int = 12, batch: int = 8, seq: int = 512) -> Trace:
    w, hidden, heads = _Writer(), 1024, 16
    act = batch * seq * hidden * 2  # bf16 activations, 8 MiB
    params = [w.malloc(4 * hidden * hidden * 2) for _ in range(layers)]  # 8 MiB per layer
    params += [w.malloc(hidden * 2) for _ in range(4 * layers)]  # biases, norms: 2 KiB
    adam = [w.malloc(2 * 4 * hidden * hidden * 4) for _ in range(layers)]  # fp32 m and v
    for _ in range(steps):
        saved: list[list[int]] = []
        for _layer in range(layers):
            keep = [w.malloc(act), w.malloc(batch * heads * seq * seq * 2)]  # x, scores 64 MiB
            keep.append(w.malloc(batch * seq * 4))  # layer-norm statistics, 16 KiB
            tmp = w.malloc(4 * act)  # the MLP's wide activation
            keep.append(w.malloc(act))
            w.free(tmp)
            saved.append(keep)
        loss = w.malloc(4)
        for keep in reversed(saved):
            grads = [w.malloc(4 * hidden * hidden * 2), w.malloc(hidden * 2)]
            g_in = w.malloc(act)
            for i in keep:
                w.free(i)
            w.free(g_in)
            for g in grads:
                w.free(g)
        w.free(loss)
    for i in params + adam:
        w.free(i)
    return Trace("training", 80 * GiB, w.array())


def _inference(w: _Writer, rng: random.Random, batches: int, hidden: int = 4096) -> None:
    weights = [w.malloc(hidden * hidden * 2) for _ in range(8)]  # 32 MiB each
    for _ in range(batches):
        lengths = [rng.randint(16, 2048) for _ in range(rng.randint(1, 8))]
        tokens = sum(lengths)
        x = w.malloc(tokens * hidden * 2)
        for _layer in range(4):
            h = w.malloc(tokens * 4 * hidden * 2)
            small = [w.malloc(rng.randint(1, 64) * 1024) for _ in range(3)]
            y = w.malloc(tokens * hidden * 2)
            w.free(h)
            for s in small:
                w.free(s)
            w.free(x)
            x = y
        w.free(x)
    for i in weights:
        w.free(i)


def inference(batches: int = 300, seed: int = 5) -> Trace:
    w = _Writer()
    _inference(w, random.Random(seed), batches)
    return Trace("inference", 80 * GiB, w.array())


def tight(batches: int = 300, seed: int = 5) -> Trace:
    w = _Writer()
    _inference(w, random.Random(seed), batches)
    return Trace("tight", 3 * GiB // 2, w.array())


def side_stream(batches: int = 200, seed: int = 11) -> Trace:
    w, rng = _Writer(), random.Random(seed)
    pending: list[int] = []
    for b in range(batches):
        # stream 1 copies the next batch in; stream 0 will read it: record_stream, free early
        buf = w.malloc(rng.choice((3, 6, 12)) * MiB + rng.randint(0, 4096), stream=1)
        w.op(LAUNCH, 1)
        w.op(RECORD_STREAM, 0, buf)
        w.op(LAUNCH, 0)
        w.free(buf)  # the program is done with it; stream 0 may still be reading
        out = w.malloc(rng.randint(1, 4) * MiB, stream=0)
        pending.append(out)
        if b % 3 == 2:
            w.op(COMPLETE, 1)
        if b % 5 == 4:
            w.op(COMPLETE, 0)
            for i in pending:
                w.free(i)
            pending = []
    for i in pending:
        w.free(i)
    w.op(SYNCHRONIZE)
    w.op(EMPTY_CACHE)  # waits for the last events and gives every segment back
    return Trace("side-stream", 80 * GiB, w.array())


def churn(live: int = 5_000, steps: int = 40_000, seed: int = 3) -> Trace:
    w, rng = _Writer(), random.Random(seed)
    held = [w.malloc(rng.randint(1, 128) * 512) for _ in range(live)]
    for _ in range(steps):
        j = rng.randrange(len(held))
        w.free(held[j])
        held[j] = w.malloc(rng.randint(1, 128) * 512)
    for i in held:
        w.free(i)
    return Trace("churn", 80 * GiB, w.array())


def mid_batch(trace: Trace) -> int:
    """The first op past the middle of `trace` that follows a small malloc inside a layer: a
    moment with activations live (where the picture is taken)."""
    ops = trace.ops
    for i in range(len(ops) // 2, len(ops)):
        if ops[i - 1]["kind"] == MALLOC and ops[i - 1]["size"] < MiB and ops[i]["kind"] == MALLOC:
            return i
    return len(ops) // 2


TRACES = {
    "training": training,
    "inference": inference,
    "side-stream": side_stream,
    "tight": tight,
    "churn": churn,
}


def load(name: str) -> Trace:
    return TRACES[name]()
