"""A pass that asks for its claim while the claims' first list is still coming in (issue 27 item 4): the operator
now lists schedules as fast as claims, so a schedule's first pass can start before the claims are listed. It must
see the claim the list brings, not "absent" (which left the schedule not ready until the claim next changed: a
cluster test waited 60 s for a Job that never came)."""

from __future__ import annotations

import threading
from typing import Any

from dreamkeeper.kube.caches import ClaimCache, project_claim
from dreamkeeper.kube.informer import Informer, Store

CLAIM: dict[str, Any] = {
    "metadata": {"name": "agent-data", "namespace": "ns", "uid": "c-1", "resourceVersion": "7"},
    "spec": {"accessModes": ["ReadWriteOnce"]},
}


class NoApi:
    def get_pvc(self, namespace: str, name: str) -> Any:
        raise AssertionError("a synced cache answers from its store")


def test_a_claim_listed_while_the_pass_waited_for_the_list_is_found() -> None:
    store = Store(project_claim)
    informer = Informer(api=None, path="", store=store, what="claims")  # type: ignore[arg-type]
    cache = ClaimCache(NoApi(), store, [informer])  # type: ignore[arg-type]
    found: list[Any] = []
    asking = threading.Thread(target=lambda: found.append(cache.get_claim("ns", "agent-data")))
    asking.start()
    # The pass has read the empty store and waits for the first list; the list comes in.
    asking.join(timeout=0.5)
    assert asking.is_alive(), "the pass waits for the first list"
    store.replace([CLAIM], "7")
    informer.synced.set()
    asking.join(timeout=60)
    assert not asking.is_alive()
    assert found and found[0] is not None and found[0]["metadata"]["name"] == "agent-data"
    # And a claim that is not in the list is absent, without asking the API server.
    assert cache.get_claim("ns", "other") is None
