"""GIVEN (not graded): the generator of the request traces in traces/ (run it to remake them).

    python gen_traces.py            # writes traces/<kind>.json for the shipped seeds

A trace is a list of requests, each a prompt and one output per parallel sample, written as
*segments* [seed, length]: a segment's tokens are pseudo-random ids derived from its seed
(tokens() below), so a system prompt shared by 100 requests is one segment, stored once.
Only the identity of tokens matters to a KV cache, never their meaning.

Kinds (the shapes that make prefix caching pay off in production):
- system-prompt:     a few system prompts (Zipf-popular) + a user message each;
- multi-turn:        chats; turn k's prompt is turn k - 1's prompt + its answer + a new message;
- parallel-sampling: a shared few-shot prefix + a question, n = 2..4 samples per request.

Each trace also carries the pool it is replayed on (block size, gpu and cpu blocks, how many
sequences run at once): small enough that blocks run out, so eviction and preemption happen.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

VOCAB = 32000
SHIPPED = {"system-prompt": 7, "multi-turn": 11, "parallel-sampling": 13}
CONFIG = {  # block_size, num_gpu_blocks, num_cpu_blocks, max_running
    "system-prompt": (16, 320, 64, 24),
    "multi-turn": (16, 400, 64, 16),
    "parallel-sampling": (16, 240, 48, 32),
}
_MASK = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def tokens(segments: list[list[int]]) -> list[int]:
    """The token ids of a list of [seed, length] segments, concatenated."""
    out: list[int] = []
    for seed, length in segments:
        base = _splitmix64(seed)
        out.extend(_splitmix64(base + i) % VOCAB for i in range(length))
    return out


def _system_prompt(rng: random.Random, n: int) -> list[dict[str, Any]]:
    systems = [[rng.getrandbits(48), length] for length in (600, 300, 900, 150)]
    reqs = []
    for i in range(n):
        system = rng.choices(systems, weights=(0.4, 0.3, 0.2, 0.1))[0]
        user = [rng.getrandbits(48), rng.randint(10, 200)]
        out = [[rng.getrandbits(48), rng.randint(10, 120)]]
        reqs.append({"id": i, "prompt": [system, user], "outputs": [out]})
    return reqs


def _multi_turn(rng: random.Random, chats: int, turns: int = 4) -> list[dict[str, Any]]:
    system = [rng.getrandbits(48), 200]
    history = [[system] for _ in range(chats)]
    reqs: list[dict[str, Any]] = []
    for _ in range(turns):  # round by round: a chat's next turn comes after its answer
        order = list(range(chats))
        rng.shuffle(order)
        for c in order:
            prompt = history[c] + [[rng.getrandbits(48), rng.randint(20, 120)]]
            answer = [[rng.getrandbits(48), rng.randint(20, 150)]]
            reqs.append({"id": len(reqs), "prompt": prompt, "outputs": [answer]})
            history[c] = prompt + answer
    return reqs


def _parallel_sampling(rng: random.Random, n: int) -> list[dict[str, Any]]:
    shots = [[rng.getrandbits(48), 400], [rng.getrandbits(48), 250]]
    reqs = []
    for i in range(n):
        prompt = [rng.choice(shots), [rng.getrandbits(48), rng.randint(20, 80)]]
        samples = rng.choice((2, 4, 4))
        outputs = [[[rng.getrandbits(48), rng.randint(20, 100)]] for _ in range(samples)]
        reqs.append({"id": i, "prompt": prompt, "outputs": outputs})
    return reqs


def generate(kind: str, seed: int, size: float = 1.0) -> dict[str, Any]:
    """The trace of `kind` made from `seed`; `size` scales the number of requests."""
    rng = random.Random(seed)
    if kind == "system-prompt":
        reqs = _system_prompt(rng, max(1, int(240 * size)))
    elif kind == "multi-turn":
        reqs = _multi_turn(rng, max(1, int(48 * size)))
    elif kind == "parallel-sampling":
        reqs = _parallel_sampling(rng, max(1, int(80 * size)))
    else:
        raise ValueError(f"unknown trace kind {kind!r} (known: {', '.join(CONFIG)})")
    block_size, gpu_blocks, cpu_blocks, max_running = CONFIG[kind]
    return {
        "kind": kind,
        "seed": seed,
        "block_size": block_size,
        "num_gpu_blocks": gpu_blocks,
        "num_cpu_blocks": cpu_blocks,
        "max_running": max_running,
        "requests": reqs,
    }


def main(out_dir: Path) -> None:
    out_dir.mkdir(exist_ok=True)
    for kind, seed in SHIPPED.items():
        path = out_dir / f"{kind}.json"
        path.write_text(json.dumps(generate(kind, seed), separators=(",", ":")) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "traces")
