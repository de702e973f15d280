"""Where a case's tensors lie in device memory, varied across the device-time samples.

A short memory-bound kernel's device time depends on where its tensors lie: in one process on one H200, the
same closure on 16 copies of the seed case's inputs at different addresses took 5.79-6.11 us (a 5.5 % spread),
and two runs on two machines, each measuring one placement, differed by exactly that much. Rotating the samples
over the copies measures the placement-averaged time, which three processes reproduced within 1.1 %
(docs/timing-basis.md, section "Where a short kernel's tensors lie"; the experiment is
docs/experiments/placement.py).

:class:`Placements` keeps ``copies`` copies of a case's storages (the inputs and every implementation's output),
the first being the tensors' own, and :meth:`Placements.rotating` wraps a closure so that each call first points
every tensor at the next copy with ``Tensor.set_``: host-side, no kernel, so nothing of it is in a call's device
time. Closures read their tensors' addresses at each launch (Triton, eager torch, Inductor's code), so the
rotation reaches them; what a closure derived at preparation (a host-side descriptor, a transposed copy) stays
where it is. The copies hold the same values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """The bytes of the storages behind ``tensors``, each storage once."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def copies_for(nbytes: int, copies: int, budget_bytes: int) -> int:
    """How many placements a case of ``nbytes`` (its storages, once each) gets: ``copies`` at most, and no more
    extra copies than ``budget_bytes`` holds (a large case, whose time placement barely moves, gets one)."""
    if copies <= 1 or nbytes <= 0:
        return 1
    return max(1, min(copies, 1 + budget_bytes // nbytes))


def for_case(tensors: Iterable[torch.Tensor], copies: int, budget_bytes: int) -> Placements | None:
    """The placements of a case's ``tensors`` (``copies`` at most, within ``budget_bytes`` of extra memory:
    :func:`copies_for`), or None where there would be one (``copies`` 1, or a case too large for the budget).
    Makes the copies: call it on a CUDA device, under the GPU lock."""
    tensors = list(tensors)
    n = copies_for(storage_bytes(tensors), copies, budget_bytes)
    return Placements(tensors, n) if n > 1 else None


class Placements:
    """``copies`` placements of ``tensors`` (tensors sharing a storage keep sharing one copy of it)."""

    def __init__(self, tensors: Iterable[torch.Tensor], copies: int) -> None:
        seen: dict[int, torch.Tensor] = {}
        for t in tensors:
            seen.setdefault(id(t), t)
        self.tensors = list(seen.values())
        storages: dict[int, Any] = {}
        for t in self.tensors:
            storages.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage())
        self.nbytes = sum(s.nbytes() for s in storages.values())
        self.copies = max(1, int(copies))
        # copy 0: the storages the tensors have now; the others are clones (same bytes, other addresses)
        placed = [storages] + [{k: s.clone() for k, s in storages.items()} for _ in range(self.copies - 1)]
        self._layouts = [
            [(p[t.untyped_storage().data_ptr()], t.storage_offset(), t.size(), t.stride()) for t in self.tensors]
            for p in placed
        ]
        self.index = 0

    def _positions(self, tensors: Iterable[torch.Tensor] | None) -> list[int]:
        if tensors is None:
            return list(range(len(self.tensors)))
        wanted = {id(t) for t in tensors}
        return [i for i, t in enumerate(self.tensors) if id(t) in wanted]

    def advance(self, positions: list[int] | None = None) -> None:
        """Point the tensors at ``positions`` (every tensor by default) at the next placement (after the last,
        the first again)."""
        if self.copies == 1:
            return
        self.index = (self.index + 1) % self.copies
        layout = self._layouts[self.index]
        with torch.no_grad():
            for i in range(len(self.tensors)) if positions is None else positions:
                storage, offset, size, stride = layout[i]
                self.tensors[i].set_(storage, offset, size, stride)

    def rotating(self, fn: Callable[[], Any], tensors: Iterable[torch.Tensor] | None = None) -> Callable[[], Any]:
        """``fn``, each call at the next placement of ``tensors`` (those ``fn`` reads and writes; every tensor
        by default): the other implementations' outputs are not moved inside its samples."""
        if self.copies == 1:
            return fn
        positions = self._positions(tensors)

        def call() -> Any:
            self.advance(positions)
            return fn()

        return call

    def warm(self, fn: Callable[[], Any], tensors: Iterable[torch.Tensor] | None = None) -> None:
        """Call ``fn`` once at every placement of ``tensors`` (a closure that would specialise on an address does
        so here, outside the samples), ending where it began."""
        call = self.rotating(fn, tensors)
        for _ in range(self.copies):
            call()
