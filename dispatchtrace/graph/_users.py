"""An op's users, found from the producers of the ops after it when first read, not linked op by op."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._records import Op


class Users:
    """The users of the ops of one list (a graph's ``ops``, each op at its ``index``): built in one pass
    over the producers on the first read, and extended by the ops added since on each later read.

    Capture and load make no tuple per producer link: most graphs are saved, summarized or drawn without
    a look at ``users`` (``Op.users`` reads it here until it is assigned).

    >>> from types import SimpleNamespace as Op  # a stand-in: ``index`` and ``producers`` are all this reads
    >>> ops = [Op(index=0, producers=())]
    >>> ops += [Op(index=1, producers=(ops[0],))]; ops += [Op(index=2, producers=(ops[0], ops[1]))]
    >>> users = Users(ops)
    >>> [[u.index for u in users.of(op)] for op in ops]
    [[1, 2], [2], []]
    >>> ops += [Op(index=3, producers=(ops[1],))]; [u.index for u in users.of(ops[1])]
    [2, 3]
    """

    __slots__ = ("_ops", "_table")

    def __init__(self, ops: list[Op]) -> None:
        self._ops = ops
        self._table: list[tuple[Op, ...]] = []

    @staticmethod
    def unread(ops: list[Op]) -> Users | None:
        """The table every op of ``ops`` reads its users from, where nothing was read from it yet (each op's
        users are still to be found from the producers as they are now: ``lint`` knows they agree); else ``None``."""
        table = ops[0]._users if ops else None
        if type(table) is Users and table._ops is ops and not table._table and not [op for op in ops if op._users is not table]:
            return table
        return None

    def of(self, op: Op) -> tuple[Op, ...]:
        """The ops that list ``op`` as a producer, in the order they ran (``()`` for an op not in the list)."""
        ops, table = self._ops, self._table
        done = len(table)
        if done < len(ops):
            table.extend([()] * (len(ops) - done))
            for user in ops[done:]:
                for p in user.producers:
                    table[p.index] += (user,)
        i = op.index
        return table[i] if i < len(table) and ops[i] is op else ()
