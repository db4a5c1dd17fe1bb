"""Training steps in a capture: each op's phase, and the forward call (op, parameter) a backward op belongs to.

``Phases`` is a thin layer over the ``Recorder``: every op still goes through ``Recorder.op`` (the
same tensor refs and edges as the forward's, so a backward op that reads a saved activation depends
on the forward op that produced it), and this layer says when it ran and what it belongs to:

- while the forward builds autograd nodes, each node is tagged with the call running and the op
  that made it (``torch.autograd.graph.node_creation_hook``, ``node.metadata``);
- while autograd runs backward, the running node (``_torch.running_node``) gives the op its
  ``origin`` (the forward call it differentiates) and ``grad_of`` (the forward op); an
  ``AccumulateGrad`` node gives ``param``, the parameter whose ``.grad`` it writes;
- a module called while backward runs is a checkpointed forward recomputed: its ops are phase
  ``recompute`` with ``origin`` the forward call it recomputes, and the call is no new call;
- inside ``torch.optim``'s ``step`` (global step pre/post hooks) ops are phase ``optimizer``.

On a torch without the node creation hook (before 2.14, ``_torch.NODE_CREATION_HOOK``) the phases
are the same, but no node is tagged: backward and recomputed ops carry no ``origin`` nor ``grad_of``
(``param`` still comes from the ``AccumulateGrad`` node), and ``g.notes`` says so once.

>>> import torch, dispatchtrace as dt
>>> lin = torch.nn.Linear(3, 1)
>>> opt = torch.optim.SGD(lin.parameters(), lr=0.1)
>>> with dt.capture(lin) as g:
...     lin(torch.ones(2, 3)).sum().backward()
...     opt.step()
>>> sorted({op.phase for op in g.ops})
['backward', 'forward', 'optimizer']
>>> from dispatchtrace._torch import NODE_CREATION_HOOK
>>> mm = [(op.name, op.origin and op.origin.label, op.grad_of and op.grad_of.name)
...       for op in g.ops if op.target == "aten.mm.default"]
>>> mm == ([('mm', 'Linear', 'addmm')] if NODE_CREATION_HOOK else [('mm', None, None)])
True
>>> sorted(op.param for op in g.ops if op.param)
['bias', 'weight']
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
from torch.autograd.graph import Node
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from .._torch import NO_NODE_CREATION_HOOK, NODE_CREATION_HOOK, graph_task_id, node_creation_hook, running_node
from ..graph import Call, GraphBuilder, Op, Phase, within
from ._autograd import accumulated, is_python_function, tag
from ._recorder import Recorder

_keys = itertools.count()
_BOOKKEEPING = frozenset({"aten.detach.default", "aten.alias.default"})
"""Ops autograd runs on a result it saves, after the op that made the node and before the node is complete."""
_CHECKPOINT = "CheckpointFunctionBackward"
"""``torch.utils.checkpoint``'s reentrant node: what it runs outside module calls is the recomputed forward."""


@dataclass(slots=True)
class _Recomputing:
    """One module call running again inside backward: the forward call it recomputes, and which of
    that call's sub-calls its own sub-calls have matched so far."""

    module: nn.Module
    call: Call | None
    used: set[int] = field(default_factory=set)


class Phases:
    """Sets the recorder's phase around backward, recomputation and optimizer steps, and each
    non-forward op's attribution. ``open`` installs the hooks, ``close`` removes every one."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.key = f"dispatchtrace.capture.{next(_keys)}"
        self._thread = threading.get_ident()
        self._recomputing: list[_Recomputing] = []
        self._steps: list[Phase] = []
        self._calls_of: dict[int, list[Call]] = {}
        self._indexed = 0
        self._tagging: Any = None
        self._handles: list[Any] = []
        self._untagged = not NODE_CREATION_HOOK  # noted once, at the first backward op

    # ---- install / remove --------------------------------------------------------------------
    def open(self) -> None:
        """Install the node-creation hook and the optimizer step hooks (the capture's ``Scope`` calls
        ``recompute_enter`` and ``recompute_exit`` for module calls made while backward runs)."""
        try:
            self._handles += [register_optimizer_step_pre_hook(self._step_pre),
                              register_optimizer_step_post_hook(self._step_post)]
            tagging = node_creation_hook(self._created)
            if tagging is not None:
                tagging.__enter__()
                self._tagging = tagging
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove every hook ``open`` installed (safe to call twice, and after a partial ``open``)."""
        tagging, self._tagging = self._tagging, None
        try:
            if tagging is not None:
                tagging.__exit__(None, None, None)
        finally:
            for handle in self._handles:
                handle.remove()
            self._handles.clear()
            self._recomputing.clear()
            self._steps.clear()

    # ---- forward: tag each autograd node -------------------------------------------------------
    def _created(self, node: Node) -> None:
        if accumulated(node) is not None:  # made when a leaf is first wired in, before its op: the leaf names it
            return
        ops = self.recorder.graph.ops
        op = None
        if not is_python_function(node):  # a custom Function's node follows whatever its forward ran
            for i in range(len(ops) - 1, max(len(ops) - 8, 0) - 1, -1):
                if ops[i].target not in _BOOKKEEPING:
                    op = ops[i]
                    break
        if graph_task_id() == -1:
            top = self.recorder.stack[-1]
            origin = top if top.parent is not None else None
        else:  # built by a backward op (create_graph=True) or a recomputation: it belongs where that op does
            origin = op.origin if op is not None else None
            if self._recomputing:
                origin = self._recomputing[-1].call
        node.metadata[self.key] = (origin, op)

    # ---- backward: attribute each op to the running node -----------------------------------------
    def backward_op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Op:
        """Record an op autograd's engine ran (``OpMode`` calls this while a backward runs)."""
        node = running_node()
        if self._untagged:
            self._untagged = False
            self.recorder.builder.add_note(NO_NODE_CREATION_HOOK)
        phase: Phase = "backward"
        origin: Call | None = None
        grad_of: Op | None = None
        param: str | None = None
        if self._recomputing:
            phase, origin = "recompute", self._recomputing[-1].call
        elif node is not None:
            leaf = accumulated(node)
            if leaf is not None:
                param = self._leaf_name(leaf)
            else:
                made = tag(node, self.key)
                if made is not None:
                    origin, grad_of = made
                    if type(node).__name__ == _CHECKPOINT:
                        phase, grad_of = "recompute", None
        recorder = self.recorder
        before = recorder.phase
        recorder.phase = phase
        try:
            op = recorder.op(func, args, kwargs, out)
        finally:
            recorder.phase = before
        GraphBuilder.set_attribution(op, phase=phase, origin=origin, grad_of=grad_of, param=param)
        return op

    def _leaf_name(self, leaf: torch.Tensor) -> str | None:
        known = self.recorder.names.tensor(leaf)
        return known[1] if known is not None else self.recorder.tracker.ref_of(leaf).name

    # ---- recomputation: module calls while backward runs -----------------------------------------
    def _ours(self) -> bool:
        """A backward of this capture's autograd graph runs now (a node this capture tagged)."""
        if graph_task_id() == -1:
            return False
        node = running_node()
        if not NODE_CREATION_HOOK:  # no node is tagged: any backward's recomputation is taken for ours
            return node is not None
        return node is not None and tag(node, self.key) is not None

    def recompute_enter(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        """A module call made while autograd runs backward (``scope.Scope``'s ``recompute`` hooks)."""
        if self._ours():
            self._recomputing.append(_Recomputing(module, self._recomputed(module)))

    def recompute_exit(self, module: nn.Module, output: Any) -> None:
        frames = self._recomputing
        for depth in range(len(frames) - 1, -1, -1):
            if frames[depth].module is module:
                del frames[depth:]
                return

    def _recomputed(self, module: nn.Module) -> Call | None:
        """The forward call a module call made in backward recomputes: the next unmatched sub-call of
        the call being recomputed around it; at the top, the call of ``module`` that holds the op of
        the running node (or the last such call below that op's call, or the module's last call)."""
        calls = self._calls(module)
        if not calls or not NODE_CREATION_HOOK:  # without tags, which forward call is recomputed is unknown
            return None
        if self._recomputing:
            frame = self._recomputing[-1]
            for call in calls:
                if call.parent is frame.call and id(call) not in frame.used:
                    frame.used.add(id(call))
                    return call
        node = running_node()
        made = tag(node, self.key) if node is not None else None
        if made is not None:
            origin, op = made
            start = op.call if op is not None else origin
            at = start
            while at is not None:
                if at.module is module:
                    return at
                at = at.parent
            below = [c for c in calls if within(c, start)]
            if below:
                return below[-1]
        return calls[-1]

    def _calls(self, module: nn.Module) -> list[Call]:
        calls = self.recorder.graph.calls
        for call in calls[self._indexed:]:
            m = call.module
            if m is not None:
                self._calls_of.setdefault(id(m), []).append(call)
        self._indexed = len(calls)
        return self._calls_of.get(id(module), [])

    # ---- optimizer steps -------------------------------------------------------------------------
    def _step_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if threading.get_ident() != self._thread:
            return
        recorder = self.recorder
        self._steps.append(recorder.phase)
        recorder.phase = "optimizer"
        self._name_state(optimizer)  # (no note: the optimizer phase says where these ops ran, and nothing is missing)

    def _step_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if threading.get_ident() == self._thread and self._steps:
            self.recorder.phase = self._steps.pop()
            self.recorder.state_names.clear()

    def _name_state(self, optimizer: torch.optim.Optimizer) -> None:
        """Gradients and optimizer state made before the block are named after their parameter
        (``0.weight.grad``, ``0.weight.exp_avg``) when the step reads them first."""
        names = self.recorder.state_names
        for group in optimizer.param_groups:
            for p in group["params"]:
                known = self.recorder.names.tensor(p)
                if known is None:
                    continue
                name = known[1]
                if p.grad is not None:
                    names[id(p.grad)] = f"{name}.grad"
                for key, value in optimizer.state.get(p, {}).items():
                    if isinstance(value, torch.Tensor):
                        names[id(value)] = f"{name}.{key}"
