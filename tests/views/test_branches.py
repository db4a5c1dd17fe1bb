"""Series-parallel decomposition on small hand-made DAGs."""

import pytest

from dispatchtrace.views._branches import MAX_NESTING, Par, Tangle, decompose


def test_chain_is_a_series():
    assert decompose(3, [(0, 1), (1, 2)], entry=[0]) == (0, 1, 2)


def test_two_paths_join():
    # 0-1 and 2-3 both read the input, 4 joins them, 5 follows
    got = decompose(6, [(0, 1), (2, 3), (1, 4), (3, 4), (4, 5)], entry=[0, 2])
    assert got == (Par(((0, 1), (2, 3))), 4, 5)


def test_skip_path_is_marked():
    # residual: 0-1-2 and the input itself join at 3
    got = decompose(4, [(0, 1), (1, 2), (2, 3)], entry=[0, 3])
    assert got == (Par(((0, 1, 2),), skip=True), 3)
    assert got[0].width == 2


def test_nested_parallel_inside_a_branch():
    # attention-like: (q, k) -> qk -> softmax, in parallel with v, joined at av
    q, k, v, qk, sm, av = range(6)
    got = decompose(6, [(q, qk), (k, qk), (qk, sm), (sm, av), (v, av)], entry=[q, k, v])
    assert got == (Par(((Par(((q,), (k,))), qk, sm), (v,))), av)


def test_outputs_without_a_join_end_in_parallel():
    assert decompose(2, [], entry=[0, 1], exit=[0, 1]) == (Par(((0,), (1,))),)


def test_bridge_is_a_tangle_joined_by_its_last_node():
    # 0 forks to 1 and 2, 1 also feeds 2, both feed 3: not series-parallel between 0 and 3
    assert decompose(4, [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)], entry=[0]) == (0, Tangle((1, 2, 3)))
    # with no single entry node, the whole graph is the tangle
    assert decompose(3, [(0, 1), (0, 2), (1, 2)], entry=[0, 1]) == (Tangle((0, 1, 2)),)


def test_tangle_stays_local_inside_a_series():
    # 0 -> bridge(1, 2) -> 3 -> (4 | 5) -> 6
    edges = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4), (3, 5), (4, 6), (5, 6)]
    assert decompose(7, edges, entry=[0]) == (0, Tangle((1, 2, 3)), Par(((4,), (5,))), 6)


def test_tangled_branch_next_to_a_clean_one():
    # input -> branch A: bridge 0,1,2 ; branch B: 3 ; both join at 4
    edges = [(0, 1), (0, 2), (1, 2), (2, 4), (3, 4)]
    got = decompose(5, edges, entry=[0, 1, 3])
    assert got == (Par(((Tangle((0, 1, 2)),), (3,))), 4)


def test_dense_connections_are_one_tangle_with_their_concat():
    # DenseNet block: layer k reads the input and every earlier layer; a concat (4) reads all
    n = 5
    edges = [(a, b) for b in range(n) for a in range(b)]
    assert decompose(n, edges, entry=range(n)) == (Tangle((0, 1, 2, 3, 4)),)


def test_weight_only_nodes_sit_before_their_consumer():
    # 0 = aten::t(weight) reads no activation; 1 = addmm(input, 0)
    assert decompose(2, [(0, 1)], entry=[1]) == (0, 1)
    # a chain of them too, and they go into the branch of their consumer
    got = decompose(5, [(0, 1), (1, 3), (2, 4), (3, 4)], entry=[2, 3])
    assert got == (Par(((0, 1, 3), (2,))), 4)


def test_nodes_fed_by_nothing_and_feeding_nothing_are_kept():
    assert decompose(1, []) == (0,)
    assert decompose(0, []) == ()


def test_backward_edges_are_refused():
    with pytest.raises(ValueError, match="execution order"):
        decompose(2, [(1, 0)])


def test_nodes_nobody_reads_stay_where_they_ran():
    # 1 = a scratch buffer (reads nothing, read by nothing) between 0 and 2
    assert decompose(3, [(0, 2)], entry=[0]) == (0, 1, 2)
    assert decompose(3, [(0, 1)], entry=[0]) == (0, 1, 2)
    # unless it is read outside: then it is an output path of its own
    assert decompose(2, [], entry=[0], exit=[0, 1]) == (Par(((0,), (1,))),)


def test_dead_ends_are_paths_to_the_end_not_joins():
    # two independent nodes reading the input: no join, even though 1 comes after 0
    assert decompose(2, [], entry=[0, 1]) == (Par(((0,), (1,))),)
    # 0 -> 1 (read by nobody) and 0 -> 2 -> 3: 1 is a branch that ends, 3 does not join it
    assert decompose(4, [(0, 1), (0, 2), (2, 3)], entry=[0]) == (0, Par(((1,), (2, 3))))


def test_nesting_is_bounded():
    # residual inside residual inside ...: node k feeds k+1 and the join 2n-1-k
    n = 300
    edges = [(k, k + 1) for k in range(2 * n - 1)] + [(k, 2 * n - 1 - k) for k in range(n - 1)]
    got = decompose(2 * n, edges, entry=[0])

    def depth(series):
        return max((1 + max(depth(b) for b in i.branches) for i in series if isinstance(i, Par)), default=0)

    assert depth(got) <= MAX_NESTING
    flat = []

    def collect(series):
        for i in series:
            if isinstance(i, Par):
                for b in i.branches:
                    collect(b)
            elif isinstance(i, Tangle):
                flat.extend(i.nodes)
            else:
                flat.append(i)

    collect(got)
    assert sorted(flat) == list(range(2 * n))
