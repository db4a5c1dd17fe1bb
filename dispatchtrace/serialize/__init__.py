"""A graph as versioned JSON and back (through the graph's builder, then linted); one file per rank."""

from ._load import SavedError, from_json, load, loads
from ._ranks import load_ranks, rank_path
from ._save import dumps, save, to_json
from ._values import FORMAT, LEGACY, RECORDS, VERSION, FormatError

__all__ = ["FORMAT", "LEGACY", "RECORDS", "VERSION", "FormatError", "SavedError", "dumps", "from_json", "load", "load_ranks",
           "loads", "rank_path", "save", "to_json"]
