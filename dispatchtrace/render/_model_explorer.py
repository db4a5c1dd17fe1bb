"""The Model Explorer format (``.mx.json``): the op graph as Google Model Explorer's graph JSON.

Model Explorer (``pip install ai-edge-model-explorer``) opens a JSON file that holds one graph
collection, ``{"label": ..., "graphs": [graph, ...]}``. Each graph is ``{"id", "nodes",
"groupNodeAttributes"}``; each node is one op (or one input of the capture, or its output) with
``id``, ``label``, ``namespace``, ``attrs``, ``incomingEdges``, ``inputsMetadata`` and
``outputsMetadata``. Model Explorer draws every namespace component as a box that opens in place,
so the namespace of an op is the chain of module calls around it, one component per call,
each spelled as ``Call.label`` spells it (``ResNet/layer1/layer1.0/layer1.0.relu#2``): the three
calls of one ``relu`` are three boxes, not one (a ``/`` in a label is escaped as ``\\/``, a ``;``
becomes ``,``, and a label two sibling calls share, two unnamed modules of one type, gets ``~2``).
``groupNodeAttributes`` gives each box its call's type and the metrics that apply (``views/_metrics.py``:
FLOPs, bytes, parameters, and any the user registered), and the empty namespace the capture's totals; each
op node has the op metrics among its ``attrs``.

Every tensor an op reads that no op made has its own input node, so every op that reads one has its
edge: the capture's inputs (``input:x``, in the root) and each parameter and buffer (``parameter:fc.bias``,
``buffer:bn1.running_mean``) in the box of the module that owns it, as Model Explorer's PyTorch
adapter puts constants. Noise ops (``views.noise``: batch norm's scratch ``empty``) are left out
unless ``noise=True``, as in the other views. The graph is named after the model, and the phase
when it is not the forward (``ResNet (backward)``), so that several files open side by side keep
their names.

>>> import json, torch, dispatchtrace as dt
>>> lin, x = torch.nn.Linear(4, 2), torch.ones(3, 4)
>>> with dt.capture(lin) as g:
...     _ = lin(x)
>>> doc = json.loads(model_explorer(g, ModelExplorerOptions(title="lin")))
>>> doc["label"], doc["graphs"][0]["id"], [(n["id"], n["namespace"]) for n in doc["graphs"][0]["nodes"]]
('lin', 'lin', [('input:input', ''), ('parameter:weight', 'Linear'), ('parameter:bias', 'Linear'), ('t', 'Linear'), ('addmm', 'Linear'), ('output', '')])
>>> doc["graphs"][0]["groupNodeAttributes"]["Linear"]["flops"]
'48'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..views import metrics, noise_ops, phase_graph

if TYPE_CHECKING:
    from ..graph import Call, Graph, Op, PhaseView, TensorRef
    from ..views import Metric

Json = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelExplorerOptions:
    """What the Model Explorer file takes: ``title``, the collection's and the graph's label (default: the
    model's type), the ``phase`` of a training step it shows (``views/_phases.py``), and ``noise`` ops shown."""

    title: str | None = None
    phase: PhaseView = "forward"
    noise: bool = False


def model_explorer(graph: Graph, o: ModelExplorerOptions) -> bytes:
    """The graph collection as compact JSON with a final newline; the same capture gives the same bytes."""
    graph = phase_graph(graph, o.phase)
    numbers = _Numbers(graph, metrics(graph, "op", "model_explorer"), metrics(graph, "call", "model_explorer"))
    label = o.title or (graph.calls[0].type if graph.calls else "capture")
    names = _Namespaces()
    hidden = frozenset() if o.noise else noise_ops(graph)
    inputs = _InputNodes(graph, names)
    nodes = [_op_node(op, names.of(op.call), inputs, numbers, hidden) for op in graph.ops if op not in hidden]
    output = _output_node(graph, inputs)  # before the input nodes are listed: it may add one
    name = label if o.phase == "forward" else f"{label} ({o.phase})"
    body: Json = {"id": name, "nodes": [*inputs.nodes, *nodes, output],
                  "groupNodeAttributes": _group_attributes(graph, names, numbers)}
    return (json.dumps({"label": label, "graphs": [body]}, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


class _Numbers:
    """The metrics' values of one graph as Model Explorer attributes: ``(name, str(value))``, unknown ones left out."""

    def __init__(self, graph: Graph, op: list[Metric], call: list[Metric]) -> None:
        self.graph = graph
        self._op = [(m.name, m.op) for m in op]
        self._call = [(m.name, m.call) for m in call]

    def of_op(self, op: Op) -> list[tuple[str, str]]:
        return [(name, str(v)) for name, fn in self._op if (v := fn(self.graph, op)) is not None]  # type: ignore[misc]

    def of_call(self, call: Call) -> list[tuple[str, str]]:
        return [(name, str(v)) for name, fn in self._call if (v := fn(self.graph, call)) is not None]  # type: ignore[misc]


class _Namespaces:
    """One namespace component per call: its label, with ``/`` escaped, made unique among its siblings."""

    def __init__(self) -> None:
        self._paths: dict[int, str] = {}
        self._taken: dict[str, set[str]] = {}
        self.boxes: list[tuple[Call, str]] = []  # (call, its namespace), for the side panel

    def of(self, call: Call) -> str:
        """``ResNet/layer1/layer1.0``: the namespace of the ops ``call`` issues directly (``""`` for the root)."""
        if call.parent is None:
            return ""
        path = self._paths.get(id(call))
        if path is None:
            parent = self.of(call.parent)
            part = call.label.replace(";", ",").replace("/", "\\/")
            taken = self._taken.setdefault(parent, set())
            unique, n = part, 1
            while unique in taken:  # two unnamed modules of one type, each called once, share a label
                n += 1
                unique = f"{part}~{n}"
            taken.add(unique)
            path = self._paths[id(call)] = f"{parent}/{unique}" if parent else unique
            self.boxes.append((call, path))
        return path


class _InputNodes:
    """The capture's inputs as input nodes (``input:x``), plus any other input tensor an op reads; its
    parameters and buffers (``parameter:fc.bias``) in the box of their module."""

    def __init__(self, graph: Graph, names: _Namespaces) -> None:
        self.nodes: list[Json] = []
        self._ids: dict[int, str] = {}
        self._names = names
        self._owners: dict[str, Call] = {}  # module path -> its first call
        for call in graph.calls:
            self._owners.setdefault(call.path, call)
        for ref in graph.inputs:
            self.id_of(ref)

    def id_of(self, ref: TensorRef, reader: Call | None = None) -> str:
        node_id = self._ids.get(ref.id)
        if node_id is None:
            owned = ref.kind in ("parameter", "buffer") and ref.name
            kind = ref.kind if owned else "input"
            node_id = f"{kind}:{ref.text}"
            n = 1
            while node_id in self._ids.values():  # two tensors shown under one name (a parameter and a copy)
                n += 1
                node_id = f"{kind}:{ref.text}~{n}"
            self._ids[ref.id] = node_id
            self.nodes.append({"id": node_id, "label": ref.text if owned else "input",
                               "namespace": self._namespace(ref, reader) if owned else "",
                               "attrs": [_kv("name", ref.text), _kv("kind", ref.kind)],
                               "incomingEdges": [], "outputsMetadata": [_metadata(0, ref)]})
        return node_id

    def _namespace(self, ref: TensorRef, reader: Call | None) -> str:
        """The box of the module owning the parameter: the reading call when it is that module's, else its first call."""
        owner = (ref.name or "").rpartition(".")[0]
        if reader is not None and reader.path == owner and reader.parent is not None:
            return self._names.of(reader)
        call = self._owners.get(owner)
        return self._names.of(call) if call is not None else ""


def _kv(key: str, value: object) -> Json:
    return {"key": key, "value": str(value)}


def _metadata(slot: int, ref: TensorRef, *, dtype: bool = True) -> Json:
    """One tensor's metadata: ``tensor_shape`` as Model Explorer's own PyTorch adapter writes it
    (``float32[1, 3]``), ``dtype`` (outputs only) and ``__tensor_tag``, the name Model Explorer shows."""
    shape = ", ".join(str(s) for s in ref.shape)
    attrs = [_kv("tensor_shape", f"{ref.dtype}[{shape}]"), _kv("__tensor_tag", ref.text)]
    if dtype:
        attrs.insert(1, _kv("dtype", ref.dtype))
    return {"id": str(slot), "attrs": attrs}


def _edges(op: Op, inputs: _InputNodes, hidden: frozenset[Op] = frozenset()) -> list[Json]:
    """One edge per producer (``op.producers``: the ops whose data ``op`` read), per input tensor and per
    parameter or buffer read (a hidden noise op makes no edge)."""
    edges: list[Json] = []
    covered: set[int] = set()
    for i, ref in enumerate(op.inputs):
        if ref.producer is not None and ref.producer in op.producers:
            if ref.producer not in hidden:
                edges.append(_edge(ref.producer.name, ref.slot, i))
            covered.add(id(ref.producer))
        elif ref.producer is None and ref.kind in ("input", "parameter", "buffer"):
            edges.append(_edge(inputs.id_of(ref, op.call), 0, i))
    for p in op.producers:  # the last writer of a storage the op reads (semantics.md, "Tensors and edges")
        if id(p) in covered or p in hidden:
            continue
        written = {r.storage for r in (*p.outputs, *p.mutated)}
        i = next((i for i, ref in enumerate(op.inputs) if ref.storage in written), 0)
        slot = next((j for j, out in enumerate(p.outputs) if out.storage == op.inputs[i].storage), 0) if op.inputs else 0
        edges.append(_edge(p.name, slot, i))
    return edges


def _edge(source: str, output: int, target_input: int) -> Json:
    return {"sourceNodeId": source, "sourceNodeOutputId": str(output), "targetNodeInputId": str(target_input)}


def _op_node(op: Op, namespace: str, inputs: _InputNodes, numbers: _Numbers, hidden: frozenset[Op] = frozenset()) -> Json:
    attrs = [_kv("target", op.target), _kv("op", str(op).partition("  # ")[0]), _kv("call", op.call.label)]
    attrs += [_kv(k, v) for k, v in numbers.of_op(op)]
    if op.mutated:
        written = {r.storage for r in op.mutated}  # named as the op read them (``y``, not ``%add_``)
        names = dict.fromkeys(r.text for r in op.inputs if r.storage in written) or {r.text: None for r in op.mutated}
        attrs.append(_kv("writes", ", ".join(names)))
    if op.is_view:
        attrs.append(_kv("view", "true"))
    if op.source is not None:
        attrs.append(_kv("source", op.source))
    return {"id": op.name, "label": op.short, "namespace": namespace, "attrs": attrs,
            "incomingEdges": _edges(op, inputs, hidden),
            "inputsMetadata": [_metadata(i, ref, dtype=False) for i, ref in enumerate(op.inputs)],
            "outputsMetadata": [_metadata(j, ref) for j, ref in enumerate(op.outputs)]}


def _output_node(graph: Graph, inputs: _InputNodes) -> Json:
    """The capture's outputs, as one ``output`` node whose inputs are the tensors the block returned."""
    edges = []
    for i, ref in enumerate(graph.outputs):
        if ref.producer is not None:
            edges.append(_edge(ref.producer.name, ref.slot, i))
        elif ref.kind == "input":
            edges.append(_edge(inputs.id_of(ref), 0, i))
    return {"id": "output", "label": "output", "namespace": "", "attrs": [], "incomingEdges": edges,
            "inputsMetadata": [_metadata(i, ref, dtype=False) for i, ref in enumerate(graph.outputs)],
            "outputsMetadata": []}


def _group_attributes(graph: Graph, names: _Namespaces, numbers: _Numbers) -> dict[str, dict[str, str]]:
    """``{namespace: {key: value}}`` for every call box, and ``""`` for the whole capture (Model Explorer's side panel)."""
    out = {"": {"ops": str(len(graph.ops)), "calls": str(len(graph.calls)), **dict(numbers.of_call(graph.root))}}
    for call, path in names.boxes:
        attrs = {"label": call.label, "type": call.type, "call": f"{call.index + 1} of {call.repeat}"}
        if call.inputs:
            attrs["inputs"] = ", ".join(r.shape_text for r in call.inputs)
        if call.outputs:
            attrs["outputs"] = ", ".join(r.shape_text for r in call.outputs)
        if call.source is not None:
            attrs["source"] = str(call.source)
        attrs.update(numbers.of_call(call))
        out[path] = attrs
    return out
