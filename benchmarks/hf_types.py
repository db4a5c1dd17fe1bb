"""Every ``transformers`` model type by name: does ``dt.models.build("hf:TYPE", device="meta")`` build its
default config offline, and does one forward run on meta with the builder's inputs?

Run: .venv/bin/python benchmarks/hf_types.py [--json rows.json] [TYPE ...]   (default: every type,
``dt.models.names("hf")``; about 10 minutes on one core). Prints the counts and each failure grouped by its
message; the closing note of issue 26 lists them. Never downloads anything (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import warnings
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
import torch  # noqa: E402

import dispatchtrace as dt  # noqa: E402
from dispatchtrace._text import one_line  # noqa: E402


def _timeout(*_: Any) -> None:
    raise TimeoutError("took over 90 s")


def try_type(name: str) -> dict[str, Any]:
    """One type: ``build`` (``"ok"`` or the error's line) and, if it built, ``forward`` on meta."""
    row: dict[str, Any] = {"type": name}
    signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(90)
    try:
        model, args, kwargs = dt.models.build(f"hf:{name}", device="meta")
        row.update(build="ok", cls=type(model).__name__, inputs={k: list(v.shape) for k, v in kwargs.items()})
        try:
            with torch.no_grad():
                model(*args, **kwargs)
            row["forward"] = "ok"
        except Exception as e:  # noqa: BLE001 - a survey: every failure is a row
            row["forward"] = one_line(e)[:200]
    except Exception as e:  # noqa: BLE001
        row["build"] = one_line(e)[:300]
    finally:
        signal.alarm(0)
    return row


def group(rows: list[dict[str, Any]], key: str) -> dict[str, list[str]]:
    """Failures by message (numbers and quoted names blanked, so one cause is one group)."""
    out: dict[str, list[str]] = collections.defaultdict(list)
    for r in rows:
        message = r.get(key, "ok")
        if message != "ok":
            out[re.sub(r"\d+", "N", re.sub(r"hf:\S+", "hf:TYPE", message))[:140]].append(r["type"])
    return dict(sorted(out.items(), key=lambda kv: -len(kv[1])))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("types", nargs="*")
    p.add_argument("--json", default=None, help="also write every row to this file")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    rows = [try_type(t) for t in (args.types or dt.models.names("hf"))]
    built = [r for r in rows if r["build"] == "ok"]
    print(f"{len(rows)} types: {len(built)} build offline from their default config, "
          f"{sum(r.get('forward') == 'ok' for r in built)} of them also run a forward on meta")
    for title, key, these in (("cannot be built", "build", rows), ("built, forward fails on meta", "forward", built)):
        print(f"\n{title}:")
        for message, names in group(these, key).items():
            print(f"  {len(names):>3}  {message}\n       {' '.join(names)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
