"""Tracker: which ref a live tensor is now, storage identity and write versions."""

from __future__ import annotations

import torch

from dispatchtrace.graph import GraphBuilder, Kind, Op
from dispatchtrace.recording._tracker import Tracker


def _tracker() -> tuple[Tracker, list[torch.Tensor]]:
    seen: list[torch.Tensor] = []

    def namer(t: torch.Tensor) -> tuple[Kind, str | None]:
        seen.append(t)
        return "input", f"x{len(seen) - 1}"

    return Tracker(namer), seen


def _op(b: GraphBuilder, name: str) -> Op:
    return b.add_op(b.graph.root, name, f"aten.{name}.default", (), {}, (), ())


def test_first_sight_names_an_external_tensor_once() -> None:
    tracker, seen = _tracker()
    x = torch.ones(2, 3)
    ref = tracker.ref_of(x)
    assert (ref.kind, ref.name, ref.producer, ref.version, ref.shape, ref.dtype) == ("input", "x0", None, 0, (2, 3), "float32")
    assert tracker.ref_of(x) is ref and tracker.known(x).ref is ref
    assert seen == [x] and tracker.inputs == [ref]  # an input: a graph input


def test_views_share_their_bases_storage_and_others_do_not() -> None:
    tracker, _ = _tracker()
    x, y = torch.ones(4), torch.ones(4)
    assert tracker.ref_of(x.view(2, 2)).storage == tracker.ref_of(x).storage != tracker.ref_of(y).storage


def test_a_write_makes_a_new_version_and_readers_get_a_refreshed_ref() -> None:
    tracker, _ = _tracker()
    b = GraphBuilder()
    x = torch.ones(3)
    before = tracker.ref_of(x)
    add_ = _op(b, "add_")
    storage = tracker.write(x, add_)
    assert (storage.version, storage.writer) == (1, add_)
    assert tracker.known(x).ref is before  # known: as last recorded
    after = tracker.refreshed(x).ref  # refreshed: remade at the new version, same identity otherwise
    assert after is not before and after.version == 1
    assert (after.storage, after.kind, after.name, after.slot) == (before.storage, before.kind, before.name, before.slot)
    assert tracker.ref_of(x) is after


def test_outputs_name_their_producer_and_slot_and_an_in_place_result_keeps_its_kind() -> None:
    tracker, _ = _tracker()
    b = GraphBuilder()
    x = torch.ones(3)
    tracker.ref_of(x)
    split = _op(b, "split")
    parts = x.split(1)
    refs = [tracker.produced(t, split, False, i) for i, t in enumerate(parts)]
    assert [(r.producer, r.slot, r.kind) for r in refs] == [(split, 0, "activation"), (split, 1, "activation"), (split, 2, "activation")]
    relu_ = _op(b, "relu_")
    tracker.write(x, relu_)
    ref = tracker.produced(x, relu_, True)
    assert (ref.producer, ref.kind, ref.name, ref.version) == (relu_, "input", "x0", 1)


def test_a_reused_address_is_a_new_storage_while_the_tracker_is_open() -> None:
    tracker, _ = _tracker()
    sids = set()
    for _ in range(5):
        t = torch.empty(1024)
        sids.add(tracker.ref_of(t).storage)
        del t
    assert len(sids) == 5


def test_close_forgets_live_tensors_but_refs_stay_valid() -> None:
    tracker, seen = _tracker()
    x = torch.ones(2)
    ref = tracker.ref_of(x)
    tracker.close()
    assert ref.name == "x0"
    again = tracker.ref_of(x)
    assert again is not ref and again.name == "x1" and len(seen) == 2


def test_a_read_depends_on_the_last_writer_of_each_byte_it_covers() -> None:
    tracker, _ = _tracker()
    b = GraphBuilder()
    z = torch.zeros(3, 4)
    state = tracker.known(z)
    first, second, third = _op(b, "first"), _op(b, "second"), _op(b, "third")
    tracker.write(z[0], first)
    tracker.write(z[1], second)
    assert tracker.writers(z, state) == [second, first]
    assert tracker.writers(z[2], state) == []
    assert tracker.writers(z[0, 1:3], state) == [first]
    tracker.write(z[0:2], third)  # covers both earlier writes: they are no last writer any more
    assert tracker.writers(z, state) == [third]
    assert [w[2] for w in state.storage.writes] == [third] and state.storage.version == 3
    assert tracker.writers(z[:, 3], state) == [third]  # a strided column: elements 3, 7 (third) and 11
    fourth = _op(b, "fourth")
    tracker.write(z[:, 1], fourth)  # a column: its interval [1, 9] holds columns 2 and 3 of rows 0 to 2
    assert tracker.writers(z[:, 2], state) == [third] and tracker.writers(z[2], state) == [fourth]
    assert tracker.writers(z[:, 1:3], state) == [fourth, third]
    tracker.write(z[:, 1:3].t(), _op(b, "fifth"))  # a transpose covering the column: it is dropped
    assert [w[2].name for w in state.storage.writes] == ["third", "fifth"]


def test_set_moves_the_tensor_to_the_other_storage_without_writing_it() -> None:
    tracker, _ = _tracker()
    b = GraphBuilder()
    a, y = torch.zeros(2), torch.ones(2)
    old, other = tracker.known(a).storage, tracker.known(y).storage
    a.set_(y)
    moved = tracker.write(a, _op(b, "set_"))
    assert moved is other and moved.version == 1 and not moved.writes
    assert old.version == 0 and tracker.known(a).storage is other
    assert tracker.ref_of(a).storage == tracker.ref_of(y).storage
