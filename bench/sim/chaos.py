"""Chaos for the year simulation (issue 22): random undos, SIGKILLs of undo, restore and cycle, and clock jumps, each
followed by the simulation's own census (``census.py``) and compared with what the command reported.

Every decision is drawn from ``random.Random(f"chaos-{seed}-{cycle}")``: a run is reproducible. Per cycle slot:

* with ``clock_ahead`` / ``clock_back`` the cycle runs with its clock 100 days ahead / a day back. The next cycle on
  the true clock then finds its history dated ahead and refuses purge and decay; the operator's answer (the
  runbook's) is modelled: the following cycle runs with ``--trust-clock``;
* with ``kill_cycle`` the cycle is SIGKILLed (a real ``SIGKILL``, in a forked child) at a random guarded write, and
  the Job's retry (5 minutes later) runs it again: its recovery finishes the killed journal;
* with ``undo`` a random cycle among the last ten is undone afterwards, SIGKILLed midway with ``kill_undo`` (the
  next cycle's recovery resumes it);
* with ``restore`` one to three archived entries are restored by hand, SIGKILLed midway with ``kill_restore``.

Every command, the killed ones included, is censused: specifics lost and entries orphaned (both must be 0), and,
for each command that reports (cycle, undo), its ``specificsLost`` and ``orphaned`` must equal the census's.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import typer

from bench.sim.census import CommandCensus, census, disk
from bench.sim.dreamkeeper_arm import ArmCycle, DreamkeeperArm
from dreamkeeper.consolidation.cycle import CycleOutcome
from dreamkeeper.consolidation.memory_cli import restore_command
from dreamkeeper.consolidation.undo import journals_of, undo_cycle
from dreamkeeper.memory import ARCHIVED_BY_CYCLE, CycleLock
from dreamkeeper.memory import atomic as atomic_module

RETRY = timedelta(minutes=5)
EXAMPLES = 12


@dataclass
class ChaosRates:
    kill_cycle: float = 0.04
    undo: float = 0.03
    kill_undo: float = 0.5
    restore: float = 0.04
    kill_restore: float = 0.4
    clock_ahead: float = 0.015
    clock_back: float = 0.015
    ahead_days: float = 100.0
    back_days: float = 1.0


@dataclass
class ChaosTally:
    events: Counter[str] = field(default_factory=Counter)
    commands: Counter[str] = field(default_factory=Counter)
    independent_lost: int = 0
    independent_orphaned: int = 0
    reported_lost: int = 0
    reported_orphaned: int = 0
    losses_reversed: int = 0
    clock_refusals: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "events": dict(sorted(self.events.items())),
            "commandsCensused": dict(sorted(self.commands.items())),
            "independentSpecificsLost": self.independent_lost,
            "independentOrphaned": self.independent_orphaned,
            "reportedSpecificsLost": self.reported_lost,
            "reportedOrphaned": self.reported_orphaned,
            "lossesReversed": self.losses_reversed,
            "clockRefusals": self.clock_refusals,
            "reportCensusMismatches": len(self.mismatches),
            "mismatchExamples": self.mismatches[:EXAMPLES],
            "lossExamples": self.examples[:EXAMPLES],
        }


def killable(action: Callable[[], None], kill_at: int) -> bool:
    """Run ``action`` in a forked child that SIGKILLs itself as it is about to make its ``kill_at``-th guarded write
    (after the write's temp is written and checked, before it is put in place). True when it was killed; the
    child's other failures are printed and reported as not killed."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            seen = [0]

            def hook(stage: str, path: object) -> None:
                if stage == "checked":
                    seen[0] += 1
                    if seen[0] == kill_at:
                        os.kill(os.getpid(), signal.SIGKILL)

            with atomic_module.write_seam(hook), contextlib.redirect_stdout(io.StringIO()):
                action()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


class Chaos:
    def __init__(self, arm: DreamkeeperArm, seed: int, rates: ChaosRates) -> None:
        self.arm = arm
        self.seed = seed
        self.rates = rates
        self.tally = ChaosTally()
        self.history: list[str] = []  # cycles that left journals, oldest first
        self._trust_next = False

    # ---- one slot ---------------------------------------------------------------------------------------------

    def cycle(self, cycle: int, now: datetime) -> ArmCycle:
        rng = random.Random(f"chaos-{self.seed}-{cycle}")
        rates = self.rates
        clock, jumped = now, False
        draw = rng.random()
        if draw < rates.clock_ahead:
            clock, jumped = now + timedelta(days=rates.ahead_days), True
            self.tally.events["clock ahead"] += 1
        elif draw < rates.clock_ahead + rates.clock_back:
            clock, jumped = now - timedelta(days=rates.back_days), True
            self.tally.events["clock back"] += 1
        trust = self._trust_next and not jumped
        if trust:
            self.tally.events["cycles run with --trust-clock"] += 1
        if rng.random() < rates.kill_cycle:
            kill_at = rng.randint(1, 80)
            before = disk(self.arm.store)
            killed = killable(lambda: self._engine(cycle, clock, trust), kill_at)
            self.tally.events["cycle SIGKILLed" if killed else "cycle kill drawn, finished first"] += 1
            self._check("cycle (killed)" if killed else "cycle (child)", before, None)
            self.arm.reseed_ids(f"{cycle}-retry")
            clock += RETRY
        before = disk(self.arm.store)
        outcome = self._engine(cycle, clock, trust)
        report = outcome.report
        self._check("cycle", before, (report.specifics_lost, report.orphaned))
        self.tally.losses_reversed += report.losses_reversed
        self.tally.clock_refusals += report.clock_refusals
        if trust:
            self._trust_next = False
        elif not jumped and report.clock_refusals:
            self._trust_next = True  # the operator reads the Warning and confirms the clock next time
        if journals_of(self.arm.agent_dir, report.cycle_id):
            self.history.append(report.cycle_id)
        if self.history and rng.random() < rates.undo:
            self._undo(rng.choice(self.history[-10:]), rng)
        if rng.random() < rates.restore:
            self._restore(rng)
        return self.arm.observe(outcome)

    def _engine(self, cycle: int, clock: datetime, trust: bool) -> CycleOutcome:
        return self.arm.run_engine(cycle, clock, trust_clock=trust)

    # ---- undo and restore -------------------------------------------------------------------------------------

    def _undo(self, cycle_id: str, rng: random.Random) -> None:
        agent = self.arm.agent_dir

        def undo() -> Any:
            with CycleLock(agent, f"undo {cycle_id}"):
                return undo_cycle(agent, self.arm.memory, cycle_id)

        before = disk(self.arm.store)
        if rng.random() < self.rates.kill_undo:
            killed = killable(undo, rng.randint(1, 40))
            self.tally.events["undo SIGKILLed" if killed else "undo kill drawn, finished first"] += 1
            self._check("undo (killed)" if killed else "undo (child)", before, None)
            return
        result = undo()
        self.tally.events["undo"] += 1
        self.tally.losses_reversed += len(result.losses_reversed)
        self._check("undo", before, (len(result.specifics_lost), len(result.orphaned)))

    def _restore(self, rng: random.Random) -> None:
        ours = sorted(s.id for s in self.arm.store.scan().archived if s.entry.meta(ARCHIVED_BY_CYCLE) is not None)
        if not ours:
            return
        ids = rng.sample(ours, min(len(ours), rng.randint(1, 3)))

        def restore() -> None:
            with contextlib.suppress(typer.Exit), contextlib.redirect_stdout(io.StringIO()):
                restore_command(self.arm.agent_dir, ids, None)

        before = disk(self.arm.store)
        if rng.random() < self.rates.kill_restore:
            killed = killable(restore, 1)
            self.tally.events["restore SIGKILLed" if killed else "restore kill drawn, finished first"] += 1
            self._check("restore (killed)" if killed else "restore (child)", before, None)
            return
        with contextlib.redirect_stderr(io.StringIO()):
            restore()
        self.tally.events["restore"] += 1
        self._check("restore", before, (0, 0))

    # ---- the census -------------------------------------------------------------------------------------------

    def _check(self, command: str, before: dict[str, Any], reported: tuple[int, int] | None) -> CommandCensus:
        found = census(command, before, disk(self.arm.store))
        self.tally.commands[command] += 1
        self.tally.independent_lost += len(found.lost)
        self.tally.independent_orphaned += len(found.orphaned)
        if found.lost or found.orphaned:
            self.tally.examples.append({"command": command, "lost": found.lost[:10], "orphaned": found.orphaned[:10]})
            print(f"chaos census: {command} lost {found.lost[:10]} orphaned {found.orphaned[:10]}", file=sys.stderr)
        if reported is not None:
            lost, orphaned = reported
            self.tally.reported_lost += lost
            self.tally.reported_orphaned += orphaned
            if (lost, orphaned) != (len(found.lost), len(found.orphaned)):
                self.tally.mismatches.append(
                    {"command": command, "reported": [lost, orphaned], "census": [len(found.lost), len(found.orphaned)]}
                )
        return found


def rates_dict(rates: ChaosRates) -> dict[str, float]:
    return asdict(rates)
