"""Hidden tests of multinode-faults: random states from the run seed against oracles written
here, and every drill kind (kill, stop, partition, link, slow, flap) on real clusters."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np
import pytest

from harness.testing import rng

SUSPECT_AFTER, DEAD_AFTER = 0.3, 1.5  # the drills' thresholds (conftest.py, checked below)
DRILL_KINDS = ("kill", "stop", "partition", "link", "slow", "flap")

Q = 1 / 64  # every random time is a multiple of 1/64: sums and differences are exact


# --------------------------------------------------------------------------- oracles
class OracleDetector:
    def __init__(
        self, peers: list[int], start: float, suspect_after: float, dead_after: float
    ) -> None:
        self.s, self.d = suspect_after, dead_after
        self.last = {p: start for p in peers}
        self.died: dict[int, float] = {}

    def _settle(self, p: int, now: float) -> None:
        if p not in self.died and now - self.last[p] >= self.d:
            self.died[p] = self.last[p] + self.d

    def heartbeat(self, p: int, now: float) -> None:
        self._settle(p, now)
        if p not in self.died:
            self.last[p] = now

    def closed(self, p: int, now: float) -> None:
        self._settle(p, now)
        self.died.setdefault(p, now)

    def status(self, p: int, now: float) -> str:
        self._settle(p, now)
        if p in self.died:
            return "dead"
        return "suspect" if now - self.last[p] >= self.s else "alive"


def oracle_views(drill: Any, events: Any) -> dict[int, dict[int, str]]:
    """Each reporting host's final view, by the rules (the oracle's detector)."""
    views = {}
    for o, tr in drill.traces.items():
        det = OracleDetector(sorted(tr["heartbeats"]), tr["start"], SUSPECT_AFTER, DEAD_AFTER)
        for when, what, p in events(tr):
            getattr(det, what)(p, when)
        views[o] = {p: det.status(p, tr["end"]) for p in tr["heartbeats"]}
    return views


def stalled(drill: Any, views: dict[int, dict[int, str]]) -> bool:
    """A dead verdict between two hosts the fault did not touch: the machine itself stopped a
    host for dead_after seconds (a loaded CI machine can), so the drill proves nothing."""
    touched = drill.faulty_hosts() | set(drill.faulty_link() or ())
    return any(
        status == "dead" and o not in touched and p not in touched
        for o, view in views.items()
        for p, status in view.items()
    )


def probes_of(drill: Any) -> dict[tuple[int, int], list[float]]:
    return {
        (src, dst): tr["probes"][src] for dst, tr in drill.traces.items() for src in tr["probes"]
    }


# --------------------------------------------------------------------------- detect
def random_script(g: np.random.Generator) -> tuple[list[int], float, float, float, list[Any]]:
    """A random detector session: peers, start, thresholds, and calls in time order, with gaps
    below, at and above both thresholds, closes, and heartbeats after death."""
    peers = sorted(int(p) for p in g.choice(16, int(g.integers(1, 5)), replace=False))
    start = float(g.integers(0, 6400)) * Q
    s = float(g.integers(4, 64)) * Q
    d = s + float(g.integers(4, 128)) * Q
    calls: list[Any] = []
    for p in peers:
        t = start
        for _ in range(int(g.integers(0, 12))):
            kind = g.choice(["short", "suspect", "exact-s", "exact-d", "long"],
                            p=[0.45, 0.2, 0.1, 0.1, 0.15])  # fmt: skip
            gap = {
                "short": float(g.integers(1, max(2, int(s / Q)))) * Q,
                "suspect": s + float(g.integers(0, max(1, int((d - s) / Q)))) * Q,
                "exact-s": s,
                "exact-d": d,
                "long": d + float(g.integers(0, 64)) * Q,
            }[str(kind)]
            t += gap
            calls.append((t, "heartbeat", p))
        if g.random() < 0.25:
            calls.append((t + float(g.integers(0, 64)) * Q, "closed", p))
    horizon = max([c[0] for c in calls], default=start) + d + 1
    for _ in range(40):
        calls.append((start + float(g.integers(0, int((horizon - start) / Q) + 1)) * Q, "status",
                      peers[int(g.integers(len(peers)))]))  # fmt: skip
    for p in peers:  # looks exactly at the thresholds
        calls += [(start + s, "status", p), (start + d, "status", p)]
    order = {"heartbeat": 0, "closed": 1, "status": 2}
    calls.sort(key=lambda c: (c[0], order[c[1]]))
    return peers, start, s, d, calls


@pytest.mark.kata_gate(
    "FailureDetector's status differs from the silence rules on random heartbeat sequences "
    "(gaps below, at and above suspect_after and dead_after, closes, heartbeats after death)"
)
def test_detect_random_sequences(detector: Any, kata_rng: Any) -> None:
    for case in range(150):
        peers, start, s, d, calls = random_script(kata_rng)
        mine = detector.FailureDetector(peers, start, s, d)
        ref = OracleDetector(peers, start, s, d)
        done = []
        for t, what, p in calls:
            done.append(f"{what}({p}, {t})")
            if what == "status":
                got, want = mine.status(p, t), ref.status(p, t)
                assert got == want, (
                    f"FailureDetector({peers}, start={start}, suspect_after={s}, dead_after={d}) "
                    f"(case {case}): after {'; '.join(done[-8:])} status is {got!r}, expected "
                    f"{want!r}"
                )
            else:
                getattr(mine, what)(p, t)
                getattr(ref, what)(p, t)


def test_detect_refuses_bad_arguments(detector: Any) -> None:
    from harness.testing import raises

    for s, d in ((0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (-1.0, 1.0)):
        with raises(ValueError, f"FailureDetector([1], 0, {s}, {d}) must refuse the thresholds"):
            detector.FailureDetector([1], 0.0, s, d)
    det = detector.FailureDetector([1, 2], 0.0, 0.5, 1.0)
    for call in ("heartbeat", "closed", "status"):
        with raises(ValueError, f"FailureDetector.{call} must refuse a peer it does not know (9)"):
            getattr(det, call)(9, 0.1)


@pytest.mark.tier("cluster-sim")  # a real cluster
@pytest.mark.kata_gate(
    "FailureDetector's timeline differs from the silence rules on the heartbeats recorded in "
    "real drills (a killed, stopped or partitioned host, a cut, slow or flapping link)"
)
def test_detect_every_drill(detector: Any, drill: Any, replay: Any, drills: Any) -> None:
    assert (drills.SUSPECT_AFTER, drills.DEAD_AFTER, drills.KINDS) == (
        SUSPECT_AFTER,
        DEAD_AFTER,
        DRILL_KINDS,
    ), "the hidden tests' drill constants are stale"
    detector.FailureDetector([0], 0.0, SUSPECT_AFTER, DEAD_AFTER)
    for kind in DRILL_KINDS:
        dr = drill(kind)
        for o, tr in dr.traces.items():
            got = replay(
                lambda ps, t0: detector.FailureDetector(ps, t0, SUSPECT_AFTER, DEAD_AFTER), tr
            )
            want = replay(lambda ps, t0: OracleDetector(ps, t0, SUSPECT_AFTER, DEAD_AFTER), tr)
            for p in want:
                assert got[p] == want[p], (
                    f"{kind} drill ({dr.fault}), host {o}'s detector on peer {p}: timeline "
                    f"{got[p]}, expected {want[p]} (suspect_after={SUSPECT_AFTER}, "
                    f"dead_after={DEAD_AFTER})"
                )


@pytest.mark.tier("cluster-sim")  # a real cluster
def test_detect_silent_hosts_die_in_time(detector: Any, drill: Any, replay: Any) -> None:
    detector.FailureDetector([0], 0.0, SUSPECT_AFTER, DEAD_AFTER)
    for kind in ("stop", "partition"):
        dr = drill(kind)
        (h,) = dr.faulty_hosts()
        for o, tr in dr.traces.items():
            if o == h:
                continue
            tl = replay(
                lambda ps, t0: detector.FailureDetector(ps, t0, SUSPECT_AFTER, DEAD_AFTER), tr
            )
            dead = [t for t, s in tl[h] if s == "dead"]
            assert dead, f"{kind} drill: host {o} never declared the silent host {h} dead: {tl[h]}"
            # The last heartbeat may still have been on its way when the fault fired: 0.8 s
            # of margin for a loaded machine, within the drill's 0.9 s after dead_after.
            assert dead[0] <= dr.fault_time + DEAD_AFTER + 0.8, (
                f"{kind} drill: host {o} declared host {h} dead {dead[0] - dr.fault_time:.2f} s "
                f"after the fault; the silence reached dead_after={DEAD_AFTER} s before that"
            )


# --------------------------------------------------------------------------- report
def random_views(g: np.random.Generator) -> tuple[dict[int, dict[int, str]], list[int], Any]:
    """Views of a random cluster with 0-2 failed hosts (killed or stopped: no view;
    partitioned: sees everybody dead) and 0-2 failed links among the others, plus suspicion
    sprinkled on live pairs. At least three live hosts see each link fault from outside."""
    n = int(g.integers(5, 10))
    hosts = list(range(n))
    down = sorted(int(h) for h in g.choice(n, int(g.integers(0, 3)), replace=False))
    live = [h for h in hosts if h not in down]
    links: set[tuple[int, int]] = set()
    for _ in range(int(g.integers(0, 3))):
        a, b = sorted(int(x) for x in g.choice(live, 2, replace=False))
        links.add((a, b))
    # A live host that no other live host sees alive is cut off from everybody: that is a
    # failed host, not links. Keep only link sets where every live host has a witness.
    while any(all(o == h or (min(o, h), max(o, h)) in links for o in live) for h in live if links):
        links.discard(sorted(links)[int(g.integers(len(links)))])
    how = {h: str(g.choice(["kill", "stop", "partition"])) for h in down}
    # A drill can end with a verdict on one side only: one end of a cut link has declared the
    # other dead while the other end still only suspects; a partitioned host may not have
    # declared every peer dead yet. The others' verdicts decide, not the one view.
    one_sided = {link: int(g.choice(link)) for link in links if g.random() < 0.5}
    views: dict[int, dict[int, str]] = {}
    for o in hosts:
        if o in down and how[o] != "partition":
            continue
        view = {}
        for p in hosts:
            if p == o:
                continue
            link = (min(o, p), max(o, p))
            if o in down and p not in down and g.random() < 0.3:
                view[p] = "suspect"
            elif link in links and one_sided.get(link) == o:
                view[p] = "suspect"
            elif o in down or p in down or link in links:
                view[p] = "dead"
            else:
                view[p] = "suspect" if g.random() < 0.2 else "alive"
        views[o] = view
    return views, hosts, (down, sorted(links))


@pytest.mark.kata_gate(
    "diagnose names the wrong hosts or links on random clusters (0-2 hosts killed, stopped or "
    "partitioned, 0-2 links cut, verdicts on one side only, suspicion on live links)"
)
def test_report_random_clusters(diagnose: Any, jobs: Any, kata_rng: Any) -> None:
    for case in range(300):
        views, hosts, (down, links) = random_views(kata_rng)
        got = diagnose.diagnose(views, hosts)
        want = jobs.Diagnosis(down, links)
        assert got == want, (
            f"diagnose(views, {hosts}) (case {case}) returned {got}, expected {want}; views: "
            f"{views}"
        )


@pytest.mark.tier("cluster-sim")  # a real cluster
@pytest.mark.kata_gate(
    "diagnose names the wrong host or link on the views of real drills (a killed, stopped or "
    "partitioned host, a cut link, a slow link)"
)
def test_report_drills(diagnose: Any, jobs: Any, drill: Any, drills: Any) -> None:
    diagnose.diagnose({0: {1: "alive", 2: "alive"}, 1: {0: "alive", 2: "alive"}}, [0, 1, 2])
    for kind in ("kill", "stop", "partition", "link", "slow"):
        dr = drill(kind)
        views = oracle_views(dr, drills.events)
        if stalled(dr, views):
            continue  # this machine stalled a healthy host for dead_after: no fault to judge
        if kind in ("kill", "stop", "partition"):
            want = jobs.Diagnosis(sorted(dr.faulty_hosts()), [])
        elif kind == "link":
            want = jobs.Diagnosis([], [dr.faulty_link()])
        else:
            want = jobs.Diagnosis([], [])
        got = diagnose.diagnose(views, list(range(dr.hosts)))
        assert got == want, (
            f"diagnose on the {kind} drill ({dr.fault}) returned {got}, expected {want}; "
            f"views: {views}"
        )


# --------------------------------------------------------------------------- straggler
def random_probes(g: np.random.Generator) -> tuple[dict[tuple[int, int], list[float]], list[Any]]:
    n = int(g.integers(3, 9))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    scale = 10 ** g.uniform(-4.5, 0.5)  # the machine: 30 us to 3 s per probe
    n_slow = int(g.integers(0, 3)) if len(pairs) >= 6 else int(g.integers(0, 2))
    slow = {pairs[int(i)] for i in g.choice(len(pairs), n_slow, replace=False)}
    probes: dict[tuple[int, int], list[float]] = {}
    healthy = [p for p in pairs if p not in slow]
    # One healthy link far faster than the rest (two hosts on one switch): the yardstick is
    # the links' middle, not their best.
    fast = healthy[int(g.integers(len(healthy)))] if g.random() < 0.4 else None
    for a, b in pairs:
        base = scale * g.uniform(0.7, 1.4) * (g.uniform(12, 100) if (a, b) in slow else 1)
        if (a, b) == fast:
            base = scale * g.uniform(0.03, 0.12)
        # A healthy link whose reverse direction carried a single probe, stuck 200x late:
        # alone that direction looks slow; the link's probes together do not.
        lone_late = (a, b) not in slow and g.random() < 0.2
        for src, dst in ((a, b), (b, a)):
            k = int(g.integers(0 if src > dst else 1, 6))
            if (a, b) in slow and k == 0:
                k = 1
            if lone_late:
                k = 4 if src < dst else 0
            times = list(base * g.uniform(0.8, 1.25, k))
            if times and (a, b) not in slow and g.random() < 0.3:
                times.append(base * 200)  # one probe stuck behind a retransmission
                times += list(base * g.uniform(0.8, 1.25, 2))
            if lone_late and src > dst:
                times = [base * 200]
            probes[(src, dst)] = times
    return probes, sorted(slow)


@pytest.mark.kata_gate(
    "slow_links names the wrong links on random runs (probe times from 30 us to 3 s per "
    "probe, 0-2 slow links, one healthy link far faster, one probe of a healthy link 200x "
    "late, alone in its direction at times)"
)
def test_straggler_random_runs(diagnose: Any, kata_rng: Any) -> None:
    for case in range(300):
        probes, slow = random_probes(kata_rng)
        got = diagnose.slow_links(probes)
        assert got == slow, f"slow_links (case {case}) returned {got}, expected {slow}; {probes}"


@pytest.mark.tier("cluster-sim")  # a real cluster
def test_straggler_drills(diagnose: Any, drill: Any) -> None:
    diagnose.slow_links({(0, 1): [0.01], (1, 0): [0.01], (0, 2): [0.01]})
    for kind in ("slow", "kill"):
        dr = drill(kind)
        want = [dr.faulty_link()] if kind == "slow" else []
        # The killed host's links carried two or three probes, all in the first half second:
        # too few to judge, and a dead host is the report task's, not a straggler.
        probes = {k: v for k, v in probes_of(dr).items() if not set(k) & dr.faulty_hosts()}
        meds = {k: round(statistics.median(v), 4) for k, v in probes.items() if v}
        got = diagnose.slow_links(probes)
        assert got == want, (
            f"slow_links on the {kind} drill's links returned {got}, expected {want}; "
            f"median seconds per (src, dst): {meds}"
        )


# --------------------------------------------------------------------------- recover
def run_job(
    elastic: Any, netcluster: Any, jobs: Any, name: str, losses: list[tuple[str, int, int]],
    n: int, g: np.random.Generator, every: int | None = None,
) -> None:  # fmt: skip
    """train on n hosts with losses (kind, host, step) in step order, each in the generation
    the one before it made, against the rules: the begun steps, every checkpoint saved (by
    rank 0 of its generation, with the job's state), every checkpoint loaded, the final state
    (each host's grads come from data only that host holds: no host can compute another's)."""
    every = int(g.integers(2, 5)) if every is None else every
    window = float(g.integers(8, 15)) / 4  # 2 to 3.5 s: a loaded machine needs room
    cfg = jobs.TrainConfig(steps=11, ckpt_every=every, seed=int(g.integers(1 << 20)),
                           window=window)  # fmt: skip
    faults = [netcluster.Fault(kind, host=h, step=at) for kind, h, at in losses]
    with netcluster.Cluster(n, seed=int(g.integers(1 << 20))) as c:
        res = c.run(elastic.train, cfg, faults=faults, deadline=25 + 12 * len(losses))
    assert not c.leftovers(), f"the cluster left {c.leftovers()}"
    res.check_todo()
    what = (
        f"train on {n} hosts ({name}: "
        + ", ".join(f"host {h} {kind} at step {at}" for kind, h, at in losses)
        + f"), checkpoints every {every}, window {window} s"
    )
    if len(res.fired) < len(losses):
        for h in range(n):
            res.value(h)  # what a host raised, if one did
    assert len(res.fired) == len(losses), (
        f"{what}: only {len(res.fired)} of the faults fired (a host never began its step)"
    )
    # The rules' model: generation k restarts from ckpts[k] with members[k].
    members = [list(range(n))]
    ckpts = [0]
    for _kind, h, at in losses:
        ckpts.append((at // every) * every)
        members.append([m for m in members[-1] if m != h])
    ends = [at for _k, _h, at in losses] + [cfg.steps]

    def grads(step: int, hosts: list[int]) -> Any:
        out = np.zeros(cfg.size, dtype=np.int64)
        for h in hosts:
            out += jobs.grad(cfg, h, step, data=res.results[h].data)
        return out

    state_at = [np.zeros(cfg.size, dtype=np.int64)]  # the committed state after each step
    for step in range(cfg.steps):
        k = max(i for i in range(len(ckpts)) if ckpts[i] <= step)
        state_at.append(state_at[-1] + grads(step, members[k]))
    survivors = members[-1]
    for _kind, h, at in losses:
        if _kind == "partition":
            r = res.results[h]
            late = [s for s, _st, _t in r.saves if s > at]
            assert not (r.finished and r.error is None) and not late, (
                f"{what}: the partitioned host {h} "
                + (f"saved checkpoints at steps {late} after it was cut off" if late else
                   f"finished training on its own ({r.value})")
                + "; cut off from the store it must raise StoreUnreachable"
            )  # fmt: skip
    for h in range(n):
        for s, st, _t in res.results[h].saves:
            assert s <= cfg.steps and np.array_equal(np.array(st), state_at[s]), (
                f"{what}: host {h} saved a checkpoint at step {s} whose state is not the "
                f"job's state after {s} steps: {st} vs {state_at[s].tolist()}"
            )
    for k in range(len(members)):
        saver = members[k][0]
        for s in range(ckpts[k] + every, ends[k] + 1, every):
            if s > cfg.steps:
                break
            assert any(x == s for x, _st, _t in res.results[saver].saves), (
                f"{what}: no checkpoint of step {s} from host {saver}, rank 0 of generation "
                f"{k} (members {members[k]}); it saved steps "
                f"{[x for x, _st, _t in res.results[saver].saves]}"
            )
    for h in survivors:
        r = res.results[h]
        # The protocol's own errors are the job failing, not a slip in the code.
        assert r.error_type not in ("RankFailure", "Excluded", "StoreUnreachable"), (
            f"{what}: host {h} survived every loss but raised {r.error}: train must recover "
            f"from each loss in turn, with the members that are left"
        )
    seen = set(map(tuple, res.headers))
    for k in range(1, len(members)):
        for a in members[k]:
            for b in members[k]:
                assert a >= b or (a, b, k) in seen, (
                    f"{what}: host {a} never connected to host {b} with tag {k} (generation "
                    f"{k}'s comm: node.connect(members, generation)); the relay saw tags "
                    f"{sorted({t for x, y, t in seen if (x, y) == (a, b)})} from {a} to {b}"
                )
    for new_rank, h in enumerate(survivors):
        got = res.value(h)
        assert got["members"] == survivors, (
            f"{what}: host {h}'s members are {got['members']}, expected {survivors}"
        )
        assert got["rank"] == new_rank, (
            f"{what}: host {h}'s rank is {got['rank']}, expected {new_rank}"
        )
        assert got["generation"] == len(losses), (
            f"{what}: host {h} ends in generation {got['generation']}, expected {len(losses)}"
        )
        assert got["resumed_from"] == ckpts[1:], (
            f"{what}: host {h} resumed from steps {got['resumed_from']}, expected {ckpts[1:]}"
        )
        begun = [s for s, _t in res.results[h].steps]
        want_begun = [
            s for k in range(len(members)) for s in range(ckpts[k], ends[k] + (k < len(losses)))
        ]
        assert begun == want_begun, (
            f"{what}: host {h} began steps {begun}, expected {want_begun} (each restart "
            f"begins again at its checkpoint's step)"
        )
        loaded = [x[0] for x, _t in res.results[h].loads if x is not None]
        for k in range(1, len(members)):
            if ckpts[k]:
                assert ckpts[k] in loaded, (
                    f"{what}: host {h} never loaded the checkpoint of step {ckpts[k]} after "
                    f"failure {k} (node.checkpoints.latest() returned steps {loaded})"
                )
        assert np.array_equal(got["state"], state_at[cfg.steps]), (
            f"{what}: host {h}'s final state differs from the job's (every member's grads, "
            f"each step counted in the generation that completed it): {got['state']} vs "
            f"{state_at[cfg.steps]}"
        )


def run_fault(elastic: Any, netcluster: Any, jobs: Any, kind: str) -> None:
    g = rng(f"recover-{kind}")
    n = int(g.integers(3, 6))
    lost, at = int(g.integers(n)), int(g.integers(1, 10))
    run_job(elastic, netcluster, jobs, kind, [(kind, lost, at)], n, g)


@pytest.mark.kata_gate(
    "train's survivors end with the wrong members, ranks or state after a host is stopped "
    "(hung, connections open) at a random step on 3-5 hosts"
)
def test_recover_stopped_host(elastic: Any, netcluster: Any, jobs: Any) -> None:
    run_fault(elastic, netcluster, jobs, "stop")


@pytest.mark.kata_gate(
    "train's survivors end with the wrong members, ranks or state, or the cut-off host "
    "finishes alone, after a host is partitioned at a random step on 3-5 hosts"
)
def test_recover_partitioned_host(elastic: Any, netcluster: Any, jobs: Any) -> None:
    run_fault(elastic, netcluster, jobs, "partition")


@pytest.mark.kata_gate(
    "train's survivors end with the wrong members, ranks, checkpoints or state after two "
    "hosts are lost one after the other (host 0 first, the other after the next checkpoint) "
    "on 4-5 hosts"
)
def test_recover_two_losses(elastic: Any, netcluster: Any, jobs: Any) -> None:
    g = rng("recover-two-losses")
    n = int(g.integers(4, 6))
    # Host 0 first: rank 0 of the next generation must take over the checkpoints; the
    # second loss comes after the next checkpoint, so only that one can resume it.
    second = int(g.integers(1, n))
    every = int(g.integers(2, 5))
    at1 = int(g.integers(1, 6))
    at2 = int(g.integers(max(at1 + 1, at1 // every * every + every), 10))
    kinds = [str(g.choice(["kill", "stop"])) for _ in range(2)]
    losses = [(kinds[0], 0, at1), (kinds[1], second, at2)]
    run_job(elastic, netcluster, jobs, "two losses", losses, n, g, every)


@pytest.mark.kata_gate(
    "rendezvous closes with the wrong members when hosts join one after another, each within "
    "a random window of the one before, and one host joins after the round closed"
)
def test_recover_rendezvous_window(elastic: Any, netcluster: Any, jobs: Any) -> None:
    import time

    g = rng("recover-rendezvous")
    window = float(g.integers(8, 11)) / 4  # 2 to 2.5 s
    order = [int(h) for h in g.permutation(5)]
    on_time, late = sorted(order[:4]), order[4]
    at = {h: i * window / 2 for i, h in enumerate(order[:4])}  # gaps of half a window
    at[late] = at[order[3]] + 1.5 * window  # the round closed half a window before
    rendezvous = elastic.rendezvous
    excluded = jobs.Excluded

    def join(node: Any, cfg: Any) -> Any:
        node.begin_step(0)  # every host released at once: the offsets count from here
        time.sleep(at[node.host])
        try:
            return {"members": list(rendezvous(node, 1, window))}
        except excluded:
            return {"excluded": True}

    with netcluster.Cluster(5, seed=int(g.integers(1 << 20))) as c:
        res = c.run(join, None, deadline=20 + 4 * window, barrier=0)
    res.check_todo()
    what = f"rendezvous(node, 1, window={window}) on 5 hosts joining at " + ", ".join(
        f"host {h} {at[h]:.2f} s" for h in order
    )
    for h in range(5):
        got = res.value(h)
        want = {"excluded": True} if h == late else {"members": on_time}
        assert got == want, (
            f"{what}: host {h} got {got}, expected {want} (the round closes once nobody new "
            f"joined for the window; a host that joins after it closed is Excluded)"
        )
