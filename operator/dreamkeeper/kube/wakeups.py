"""Which schedule loops a change elsewhere concerns: the claims and vocabularies each schedule references.

A schedule that is not ready because its PersistentVolumeClaim or MemoryVocabulary is missing must notice the
object appearing at once, not at its next timed pass. The index is rebuilt from every DreamSchedule event (the
spec names the references), so it never depends on a pass having checked them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from dreamkeeper.kube.objects import Body

Key = tuple[str, str]  # (namespace, name)


@dataclass
class References:
    """What one schedule points at."""

    claim: str | None = None
    vocabulary: str | None = None

    @classmethod
    def of(cls, spec: Body | None) -> References:
        spec = spec or {}
        vocabulary = (spec.get("vocabularyRef") or {}).get("name")
        return cls(claim=spec.get("claimName") or None, vocabulary=vocabulary or None)


@dataclass
class Wakeups:
    """Schedule uid -> its wake event and references; lookups by claim and by vocabulary."""

    events: dict[str, asyncio.Event] = field(default_factory=dict)
    _refs: dict[str, tuple[str, References]] = field(default_factory=dict)  # uid -> (namespace, references)

    def track(self, uid: str, namespace: str, spec: Body | None) -> asyncio.Event:
        self._refs[uid] = (namespace, References.of(spec))
        return self.events.setdefault(uid, asyncio.Event())

    def forget(self, uid: str) -> None:
        self._refs.pop(uid, None)
        self.events.pop(uid, None)

    def wake(self, uid: str) -> None:
        event = self.events.get(uid)
        if event is not None:
            event.set()

    def users_of_claim(self, namespace: str, claim: str) -> list[str]:
        return sorted(uid for uid, (ns, refs) in self._refs.items() if ns == namespace and refs.claim == claim)

    def users_of_vocabulary(self, namespace: str, vocabulary: str) -> list[str]:
        return sorted(
            uid for uid, (ns, refs) in self._refs.items() if ns == namespace and refs.vocabulary == vocabulary
        )

    def wake_claim_users(self, namespace: str, claim: str) -> list[str]:
        woken = self.users_of_claim(namespace, claim)
        for uid in woken:
            self.wake(uid)
        return woken

    def wake_vocabulary_users(self, namespace: str, vocabulary: str) -> list[str]:
        woken = self.users_of_vocabulary(namespace, vocabulary)
        for uid in woken:
            self.wake(uid)
        return woken
