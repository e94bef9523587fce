"""Which schedule loops a change elsewhere concerns: the claims and vocabularies each schedule references.

A schedule that is not ready because its PersistentVolumeClaim or MemoryVocabulary is missing must notice the
object appearing at once, not at its next timed pass. The index is rebuilt from every DreamSchedule event (the
spec names the references), so it never depends on a pass having checked them. It is kept by reference as well as
by schedule: a claim's event finds its schedules in one lookup (scanning every schedule per claim event made the
initial listing of 5,000 claims 25 million comparisons). Used on the event loop only (asyncio.Event is not
thread-safe): changes seen in other threads are handed over with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from dreamkeeper.kube.objects import Body

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
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
    _by_claim: dict[Key, set[str]] = field(default_factory=dict)
    _by_vocabulary: dict[Key, set[str]] = field(default_factory=dict)

    def track(self, uid: str, namespace: str, spec: Body | None) -> asyncio.Event:
        refs = References.of(spec)
        if self._refs.get(uid) != (namespace, refs):
            self._unindex(uid)
            self._refs[uid] = (namespace, refs)
            if refs.claim:
                self._by_claim.setdefault((namespace, refs.claim), set()).add(uid)
            if refs.vocabulary:
                self._by_vocabulary.setdefault((namespace, refs.vocabulary), set()).add(uid)
        return self.events.setdefault(uid, asyncio.Event())

    def forget(self, uid: str) -> None:
        self._unindex(uid)
        self._refs.pop(uid, None)
        self.events.pop(uid, None)

    def _unindex(self, uid: str) -> None:
        known = self._refs.get(uid)
        if known is None:
            return
        namespace, refs = known
        for index, name in ((self._by_claim, refs.claim), (self._by_vocabulary, refs.vocabulary)):
            if not name:
                continue
            users = index.get((namespace, name))
            if users is not None:
                users.discard(uid)
                if not users:
                    del index[(namespace, name)]

    def wake(self, uid: str) -> None:
        event = self.events.get(uid)
        if event is not None:
            event.set()

    def users_of_claim(self, namespace: str, claim: str) -> list[str]:
        return sorted(self._by_claim.get((namespace, claim), ()))

    def users_of_vocabulary(self, namespace: str, vocabulary: str) -> list[str]:
        return sorted(self._by_vocabulary.get((namespace, vocabulary), ()))

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
