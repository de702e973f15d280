"""kernelscope.placement: copies of a case's tensors at other addresses, the same values, rotated in turn.

Each test was seen to fail with one bug planted (then reverted): rotation_visits_every_copy_in_turn: ``advance``
not advancing, or advancing by two; copies_keep_shared_storages_shared: one clone per tensor instead of per
storage; copies_keep_each_tensors_layout: the storage offset dropped (``set_(storage, 0, ...)``); copies_for: the
budget ignored, or ``1 + budget // nbytes`` without the ``copies`` cap.
"""

from __future__ import annotations

import torch

from kernelscope import placement


def test_rotation_visits_every_copy_in_turn():
    x = torch.arange(8.0)
    home = x.data_ptr()
    places = placement.Placements([x], 3)
    seen = []
    call = places.rotating(lambda: seen.append(x.data_ptr()) or x.sum().item())
    values = [call() for _ in range(6)]
    assert values == [28.0] * 6  # the same values at every placement
    assert len(set(seen)) == 3 and seen[2] == home and seen[:3] == seen[3:]  # copy 1, copy 2, home, again
    assert places.index == 0 and x.data_ptr() == home


def test_copies_keep_shared_storages_shared():
    base = torch.arange(12.0)
    a, b = base[:6], base[6:]
    places = placement.Placements([a, b], 2)
    places.advance()
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert places.nbytes == base.untyped_storage().nbytes()  # one storage, counted once


def test_copies_keep_each_tensors_layout():
    x = torch.arange(24.0).view(4, 6)[1:, 2:]  # an offset, non-contiguous view
    before = (x.storage_offset(), x.size(), x.stride(), x.clone())
    places = placement.Placements([x], 2)
    places.advance()
    assert (x.storage_offset(), x.size(), x.stride()) == before[:3]
    assert torch.equal(x, before[3])


def test_warm_calls_once_at_every_placement_and_ends_at_home():
    x = torch.zeros(4)
    home = x.data_ptr()
    places = placement.Placements([x], 4)
    seen = []
    places.warm(lambda: seen.append(x.data_ptr()))
    assert len(seen) == 4 and len(set(seen)) == 4 and seen[-1] == home and x.data_ptr() == home


def test_copies_for():
    assert placement.copies_for(8 << 20, 16, 1 << 30) == 16  # the seed case's size: all 16
    assert placement.copies_for(300 << 20, 16, 1 << 30) == 4  # three extra copies fit the budget
    assert placement.copies_for(2 << 30, 16, 1 << 30) == 1  # a large case: the tensors as allocated
    assert placement.copies_for(100, 1, 1 << 30) == 1 and placement.copies_for(0, 16, 1 << 30) == 1


def test_one_placement_leaves_the_closure_alone():
    def fn():
        return 1

    assert placement.Placements([torch.zeros(2)], 1).rotating(fn) is fn


def test_rotating_moves_only_the_tensors_the_closure_uses():
    # the timing stage rotates an implementation's inputs and its own output, not the other implementations'
    # outputs, inside its samples
    x, mine, other = torch.zeros(4), torch.zeros(4), torch.zeros(4)
    homes = (x.data_ptr(), mine.data_ptr(), other.data_ptr())
    places = placement.Placements([x, mine, other], 3)
    call = places.rotating(lambda: None, [x, mine])
    call()
    assert x.data_ptr() != homes[0] and mine.data_ptr() != homes[1] and other.data_ptr() == homes[2]
    call(), call()
    assert (x.data_ptr(), mine.data_ptr(), other.data_ptr()) == homes


def test_for_case_keeps_the_budget_and_declines_a_single_placement():
    small = [torch.zeros(4), torch.zeros(4)]  # 32 bytes
    assert placement.for_case(small, 16, 1 << 20).copies == 16
    assert placement.for_case(small, 16, 40).copies == 2
    assert placement.for_case(small, 16, 10) is None and placement.for_case(small, 1, 1 << 20) is None
    assert placement.storage_bytes([small[0], small[0][1:]]) == 16  # a view's storage counted once
