"""A large plan's journal steps, built from the plan when needed instead of held (issue 27).

A cold start's plan at 100,000 entries journals ~107,000 steps: review stamps carrying their decays, archives with
their baselines, the successors' creates. As `model_construct`ed models they are ~2 KB each, ~220 MB that stayed alive
from the journal's write, across the executor, to the write-back index's fold at the cycle's end, and made that
cycle's peak RSS (bench/results/micro-s32.md). The decay journal already works this way (``decay_journal.DecaySteps``):
here the plan's steps are kept as recipes (``journal_steps.plan_recipes``, ~100 bytes each), and each step is built
by ``journal_steps.build_step`` (a pure function of its recipe, so the same step each time) when the file is
streamed, when the executor reaches it, and when the write-back index folds the journal in. The executor looks at a
window of steps several times (its groups' bounds, then its heads, then its archives), so the steps it built last are
kept, up to ``_RECENT`` of them. A plan of at most ``KEEP_MAX`` steps keeps its steps as a list, as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Final

from dreamkeeper.consolidation.decay_journal import BuiltSteps, write_streamed_journal
from dreamkeeper.consolidation.journal import Journal, Step, write_journal_steps
from dreamkeeper.consolidation.journal_steps import (
    FoldedStamp,
    Recipe,
    build_step,
    folded_stamp,
    plan_recipes,
    recipe_op,
)
from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.memory import MemoryStore

# A journal this short keeps its steps (~35 MB at most): a 10,000-entry cold start (~11,000 steps) is unchanged,
# and only a plan large enough to matter to the peak pays for building its steps twice more (for the executor, and
# lighter for the fold): +10% of such a cycle's instructions (bench/results/micro-s32.md).
KEEP_MAX: Final = 16_384
# The executor's look-back: a window is at most STAMP_BATCH (512) steps plus the rest of its last group.
_RECENT: Final = 4_096


class PlanSteps(BuiltSteps):
    """A plan journal's steps (a sequence of ``Step``), built from their recipes when asked for."""

    all_decays: ClassVar[bool] = False  # Journal.as_folded: a plan's journal is itself

    def __init__(self, store: MemoryStore, recipes: list[Recipe]) -> None:
        self.store = store
        self.recipes = recipes
        self._recent: dict[int, Step] = {}

    def __len__(self) -> int:
        return len(self.recipes)

    def _step(self, index: int) -> Step:
        recent = self._recent
        step = recent.get(index)
        if step is None:
            step = build_step(self.store, self.recipes[index])
            recent[index] = step
            if len(recent) > _RECENT:
                del recent[next(iter(recent))]  # the oldest built
        return step

    def written(self) -> Iterator[Step]:
        """The steps in order, for the journal's file: built, written and dropped one by one."""
        for recipe in self.recipes:
            yield build_step(self.store, recipe)

    def for_fold(self, index: int) -> Step | FoldedStamp:
        """The step as the write-back fold reads it (writeback/ingest.py): a stamp as its id, metadata and previous
        values (``FoldedStamp``), an archive without the decay it carries (the fold reads neither its ``before`` nor
        its ``after``), any other step whole. Carried decays left out took a fifth off the streamed path's extra cost
        (bench/results/micro-s32.md); stamps not built as models, most of what was left (micro-s33.md)."""
        kind, group, what, carried = recipe = self.recipes[index]
        if kind == "stamp":
            return folded_stamp(what.target, what.metadata)
        if carried is not None and kind == "archive":
            return build_step(self.store, (kind, group, what, None))
        return self[index] if kind == "update" else build_step(self.store, recipe)

    def ops_groups(self) -> list[tuple[str, int]]:
        """Each step's op and group, from the recipes alone (the write-back fold's first look needs nothing else)."""
        return [(recipe_op(recipe), recipe[1]) for recipe in self.recipes]


def write_plan_journal(agent_dir: Path, journal_id: str, plan: Plan, store: MemoryStore, now: datetime) -> Journal:
    """``journal_steps.write_journal``: the same file; a plan of more than ``KEEP_MAX`` steps streamed to it, its
    journal's steps a ``PlanSteps``."""
    recipes = plan_recipes(plan)
    if len(recipes) <= KEEP_MAX:
        return write_journal_steps(agent_dir, journal_id, [build_step(store, r) for r in recipes], store, now)
    return write_streamed_journal(agent_dir, journal_id, PlanSteps(store, recipes), store, now)


__all__ = ["KEEP_MAX", "PlanSteps", "write_plan_journal"]
