"""Admission: which misses are worth storing.

`admission: first` (the default) stores every complete answer. `admission: repeat` stores an
answer only when the request, or one close to it, was already seen once: most LLM traffic is
never repeated, and every stored answer costs the response phase a second ext_proc stream
(CPU on the router and on Envoy) plus memory. A request's first sighting is remembered here,
in this process, as its exact key and its cheap candidate vector; the second sighting (the
same exact key, or a candidate score >= the decision's similarity - `candidate_margin`, under
the same partition and context) is stored, and the third is a hit. The cheap score alone
admits: admission only spends effort, it never serves an answer, so no MiniLM check is needed.

Sightings are bounded by `admission_window` (least recently seen go first) and are per
process: each worker and each replica keeps its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from extproc.cache.backends import FloatArray, VectorGroup
from extproc.cache.keys import CacheKey


class Sightings:
    """Requests seen and not (yet) admitted, by partition and context."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._order: OrderedDict[str, tuple[str, str]] = OrderedDict()  # exact key -> (partition, context)
        self._groups: dict[tuple[str, str], VectorGroup] = {}

    def __len__(self) -> int:
        return len(self._order)

    def seen_before(self, key: CacheKey, vector: FloatArray, floor: float) -> bool:
        """True when `key` (exactly, or by a candidate score >= `floor`) was seen before;
        otherwise remember it and return False."""
        group_key = (key.partition, key.context)
        with self._lock:
            if key.exact in self._order:
                self._order.move_to_end(key.exact)
                return True
            group = self._groups.get(group_key)
            if group is not None and group.keys:
                ((near, score),) = group.best(vector, 1)
                if score >= floor:
                    self._order.move_to_end(near)
                    return True
            if group is None:
                group = self._groups[group_key] = VectorGroup(vector.shape[0])
            group.add(key.exact, vector)
            self._order[key.exact] = group_key
            while len(self._order) > self.capacity:
                old, old_group_key = self._order.popitem(last=False)
                old_group = self._groups[old_group_key]
                old_group.remove(old)
                if not old_group.keys:
                    del self._groups[old_group_key]
            return False
