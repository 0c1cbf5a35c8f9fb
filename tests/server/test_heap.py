"""extproc.server.heap: what the server loads is frozen out of the collector's sight, a reload
thaws it so that cycles among replaced objects are still freed, and a settle asked for while
requests run waits for a quiet moment."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from extproc.server import heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


def test_settle_freezes_what_is_alive() -> None:
    node = Node()
    heap.settle("test")
    assert gc.get_freeze_count() > 0
    assert not any(o is node for o in gc.get_objects())  # frozen objects are out of the collector's walk
    assert gc.is_tracked(node)


def test_a_frozen_cycle_outlives_its_use_until_resettle() -> None:
    node = Node()
    alive = weakref.ref(node)
    heap.settle("test")
    del node
    gc.collect()
    assert alive() is not None  # frozen: the collector does not look at it
    heap.resettle("reload")
    assert alive() is None  # thawed, collected; what is left is frozen again
    assert gc.get_freeze_count() > 0


def test_settle_collects_garbage_before_freezing() -> None:
    node = Node()
    alive = weakref.ref(node)
    del node  # garbage already: it must not be frozen in
    heap.settle("test")
    assert alive() is None


def test_the_settler_waits_for_a_quiet_moment_and_thaws_on_reload() -> None:
    settler = heap.Settler()
    settler.when_idle()  # nothing asked for: nothing done
    assert gc.get_freeze_count() == 0
    settler.request("model ocr loaded")
    node = Node()
    alive = weakref.ref(node)
    assert gc.get_freeze_count() == 0  # asked for, not done: requests may be in flight
    settler.when_idle()
    assert gc.get_freeze_count() > 0 and settler.pending is None
    del node
    gc.collect()
    assert alive() is not None  # frozen in by the settle
    settler.request("policy reloaded", thaw=True)
    settler.request("model vision loaded")  # a later plain request keeps the pending thaw
    settler.when_idle()
    assert alive() is None and gc.get_freeze_count() > 0
