"""The registry of output formats: a name and its suffixes map to a writer with its own typed options.

A format is one ``Format``: what it writes (its ``Subject``: a ``Graph``, a ``Diff``, several ranks'
graphs), a ``write(subject, options) -> bytes`` function (or, for a format that writes more than one
file, ``write_files(subject, options, path)``: the capture, its JSON and the kept values' safetensors beside
it) and the frozen dataclass of the options it takes. ``render`` (so ``Graph.render``, the CLI's ``-o``,
the demo, the notebook, ``write_diff`` and ``write_ranks``) finds the format by the path's suffix among
those of its subject, or by name with ``format=``, builds that format's options from the keywords given
(each format's options class is the one declaration of what it takes; a keyword the format does not
take is an error) and writes the file.

Adding a format is one module with its writer and options, plus one ``register`` call (below, for a
format of the package; a plugin or a test may call ``register`` and ``unregister`` itself);
``render`` takes whatever its options class declares. Suffixes may have several parts (``.mx.json``):
the longest registered suffix a file name ends with wins, so ``.json`` stays "save the capture" while a
second JSON-based format registers its own name and a longer suffix. Formats of different subjects may
share a suffix (the viewer, the diff page and the ranks page are all ``.html``).

>>> [f.name for f in formats()]
['svg', 'pdf', 'png', 'dot', 'tree', 'capture', 'model-explorer', 'html', 'trace', 'chakra']
>>> for_path("model.gv").name, for_path("trace.JSON").name, for_path("model.mx.json").name, for_path("model.jpg")
('dot', 'capture', 'model-explorer', None)
>>> for_path("d.html", DIFF).name, for_path("r.html", RANKS).name, [f.name for f in formats(None)][-2:]
('diff', 'ranks', ['diff', 'ranks'])
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..graph import Depth as Depth  # re-exported: what ``depth`` accepts, in every format
from ..graph import Graph
from ..serialize import save
from ..views import Diff
from . import _chakra as chakra
from . import _diagram as diagram
from . import _diff_page as diff_page
from . import _html as html
from . import _model_explorer as model_explorer
from . import _ranks as ranks
from . import _text as text
from . import _trace_json as trace_json

OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOptions:
    """The options of a format that takes none (the capture JSON)."""


@dataclass(frozen=True, slots=True)
class Subject:
    """What a format writes: instances of ``type``; ``noun`` and ``example`` (a file name) for messages."""

    type: type
    noun: str
    example: str


GRAPH = Subject(Graph, "a capture", "model.svg")
DIFF = Subject(Diff, "a diff (dt.diff(a, b))", "diff.html")
RANKS = Subject(Mapping, "several ranks' captures ({rank: Graph}, as dt.load_ranks returns)", "ranks.html")


@dataclass(frozen=True, slots=True)
class Format(Generic[OptionsT]):
    """One output format: ``name`` (for ``format=``), ``suffixes`` (lower case, with the dot),
    ``write`` (the file's bytes), ``options`` (its frozen options dataclass), ``about`` (a few
    words for help texts), ``mime`` (for the notebook), ``subject`` (what it writes: ``GRAPH``,
    ``DIFF``, ``RANKS``) and ``write_files`` (for a format of several files, in place of ``write``: it
    writes them all, ``path`` first, making missing folders)."""

    name: str
    suffixes: tuple[str, ...]
    write: Callable[[Any, OptionsT], bytes] | None
    options: type[OptionsT]
    about: str
    mime: str = "application/octet-stream"
    subject: Subject = GRAPH
    write_files: Callable[[Any, OptionsT, Path], object] | None = None

    def options_from(self, values: Mapping[str, Any]) -> OptionsT:
        """This format's options from ``render``'s keywords. An option this format does not take is a
        ``ValueError`` saying which it takes and which formats take that one; a name no format takes is
        a ``TypeError``: nothing given is ever ignored in silence.

        >>> get("tree").options_from({"depth": 2}).depth
        2
        >>> get("tree").options_from({"rankdir": "LR"})
        Traceback (most recent call last):
        ...
        ValueError: the tree format (.txt) takes no rankdir (svg, pdf, png, dot take it); it takes depth, ops, noise, at, statements, phase, metrics
        """
        names = option_names(self)
        foreign = [k for k in values if k not in names]
        if foreign:
            kin = formats(self.subject)
            takers = {k: [f.name for f in kin if k in option_names(f)] for k in foreign}
            unknown = [k for k, who in takers.items() if not who]
            if unknown and self.subject == GRAPH:
                every = sorted({n for f in kin for n in option_names(f)})
                raise TypeError(f"no format takes an option {', '.join(map(repr, unknown))}; the options are: "
                                f"{', '.join(every)}")
            which = "; ".join(f"{k} ({', '.join(who)} take{'s' if len(who) == 1 else ''} it)" if who else k
                              for k, who in takers.items())
            raise ValueError(f"the {self.name} format ({' '.join(self.suffixes)}) takes no {which}; "
                             f"it takes {', '.join(names) or 'no options'}")
        return self.options(**values)


_REGISTRY: dict[str, Format[Any]] = {}


def option_names(fmt: Format[Any]) -> tuple[str, ...]:
    """The options ``fmt`` takes, in the order its options class declares them."""
    return tuple(f.name for f in dataclasses.fields(fmt.options))  # type: ignore[arg-type]


def register(fmt: Format[Any]) -> Format[Any]:
    """Add ``fmt``; a name, or a suffix already taken for its subject, is a ``ValueError``. Returns ``fmt``."""
    if (fmt.write is None) == (fmt.write_files is None):
        raise TypeError(f"format {fmt.name!r} needs a write (one file's bytes) or a write_files (several files), one of them")
    if not dataclasses.is_dataclass(fmt.options):
        raise TypeError(f"the options of format {fmt.name!r} must be a dataclass, got {fmt.options!r}")
    bad = [s for s in fmt.suffixes if not s.startswith(".") or s != s.lower() or len(s) < 2]
    if not fmt.suffixes or bad:
        raise ValueError(f"format {fmt.name!r} needs lower-case suffixes that start with a dot, got {fmt.suffixes!r}")
    if fmt.name in _REGISTRY:
        raise ValueError(f"a format named {fmt.name!r} is already registered; unregister it first or choose another name")
    taken = {s: f.name for f in formats(fmt.subject) for s in f.suffixes}
    for s in fmt.suffixes:
        if s in taken:
            raise ValueError(f"the suffix {s} already means format {taken[s]!r}; give {fmt.name!r} a longer one (.x{s})")
    _REGISTRY[fmt.name] = fmt
    return fmt


def unregister(name: str) -> Format[Any]:
    """Remove the format called ``name`` and return it."""
    get(name)
    return _REGISTRY.pop(name)


def formats(subject: Subject | None = GRAPH) -> tuple[Format[Any], ...]:
    """Every registered format of ``subject`` (of any, for ``None``), in registration order."""
    return tuple(f for f in _REGISTRY.values() if subject is None or f.subject == subject)


def suffixes(subject: Subject = GRAPH) -> tuple[str, ...]:
    """Every registered suffix of ``subject``'s formats, in registration order: ``('.svg', '.pdf', ...)``."""
    return tuple(s for f in formats(subject) for s in f.suffixes)


def subject_of(value: object) -> Subject:
    """The subject ``value`` is (the first registered one it is an instance of); anything else is a ``TypeError``."""
    subjects = list(dict.fromkeys(f.subject for f in _REGISTRY.values()))
    for subject in subjects:
        if isinstance(value, subject.type):
            return subject
    raise TypeError(f"cannot render a {type(value).__name__}: render writes {', '.join(s.noun for s in subjects)}")


def get(name: str) -> Format[Any]:
    """The format called ``name``; an unknown name is a ``ValueError`` listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; use one of: {', '.join(_REGISTRY)}") from None


def for_path(path: str | os.PathLike[str], subject: Subject = GRAPH) -> Format[Any] | None:
    """The format of ``subject`` whose suffix ``path``'s file name ends with (the longest such suffix, any case),
    else ``None``."""
    name = Path(path).name.lower()
    found = [(s, f) for f in formats(subject) for s in f.suffixes if name.endswith(s) and len(name) > len(s)]
    return max(found, key=lambda sf: len(sf[0]))[1] if found else None


def format_of(path: str | os.PathLike[str], format: str | None = None,  # noqa: A002 - the public keyword
              subject: Subject = GRAPH) -> Format[Any]:
    """``format`` by name when given (a ``TypeError`` when it writes another subject), else the format of
    ``subject`` that ``path``'s suffix names; neither is a ``ValueError``."""
    if format is not None:
        fmt = get(format)
        if fmt.subject != subject:
            raise TypeError(f"the {fmt.name} format writes {fmt.subject.noun}, not {subject.noun}")
        return fmt
    fmt = for_path(path, subject)
    if fmt is None:
        if subject != GRAPH:
            kinds = "; ".join(f"{' '.join(f.suffixes)} ({f.about})" for f in formats(subject))
            raise ValueError(f"{path}: {subject.noun} renders to {kinds}; name it like {subject.example}")
        raise ValueError(f"cannot tell the format of {str(path)!r} from its suffix; use one of: {', '.join(suffixes())} "
                         f"(or name it: format= one of {', '.join(f.name for f in formats())})")
    return fmt


def help_text() -> str:
    """``.svg .pdf .png (a diagram drawn by graphviz's dot), .dot .gv (its DOT source), ...``: for ``--help``."""
    groups: list[tuple[str, list[str]]] = []
    for f in formats():
        if groups and groups[-1][0] == f.about:
            groups[-1][1].extend(f.suffixes)
        else:
            groups.append((f.about, list(f.suffixes)))
    return ", ".join(f"{' '.join(sufs)} ({about})" for about, sufs in groups)


def _save_capture(graph: Graph, _: NoOptions, path: Path) -> None:
    """The capture as ``Graph.save`` writes it (``serialize.save``: the JSON, and the values ``keep=`` kept
    beside it as safetensors), so that ``g.render("x.json")`` and ``g.save("x.json")`` write the same files."""
    save(graph, path)


def _diff(d: Diff, o: diff_page.DiffOptions) -> bytes:
    return diff_page.diff_page(d, title=o.title).encode()


def _ranks(r: Mapping[int, Graph], o: ranks.RanksOptions) -> bytes:
    return ranks.ranks_page(r, o).encode()


drawn = "a diagram drawn by graphviz's dot"
register(Format("svg", (".svg",), diagram.image("svg"), diagram.ImageOptions, drawn, "image/svg+xml"))
register(Format("pdf", (".pdf",), diagram.image("pdf"), diagram.ImageOptions, drawn, "application/pdf"))
register(Format("png", (".png",), diagram.image("png"), diagram.ImageOptions, drawn, "image/png"))
register(Format("dot", (".dot", ".gv"), diagram.dot_text, diagram.DiagramOptions, "its DOT source", "text/vnd.graphviz"))
register(Format("tree", (".txt",), text.tree_text, text.TreeOptions, "the tree", "text/plain"))
register(Format("capture", (".json",), None, NoOptions, "the capture, for dispatchtrace render", "application/json",
                write_files=_save_capture))
register(Format("model-explorer", (".mx.json",), model_explorer.model_explorer, model_explorer.ModelExplorerOptions,
                "Google Model Explorer's graph JSON", "application/json"))
register(Format("html", (".html", ".htm"), html.write, html.HtmlOptions, "the interactive viewer, one self-contained page",
                "text/html"))
register(Format("trace", (".trace.json",), trace_json.write, trace_json.TraceOptions,
                "a rank's step as Chrome trace events: Perfetto, chrome://tracing, Holistic Trace Analysis", "application/json"))
register(Format("chakra", (".et",), chakra.write, chakra.ChakraOptions, "a rank's step as a Chakra execution trace, for ASTRA-sim"))
register(Format("diff", (".html", ".htm"), _diff, diff_page.DiffOptions, "the page of a diff, one self-contained page",
                "text/html", DIFF))
register(Format("ranks", (".html", ".htm"), _ranks, ranks.RanksOptions, "a tab per rank and their collectives aligned",
                "text/html", RANKS))
