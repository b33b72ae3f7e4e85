"""Reciprocal rank fusion on its own: rankings of passage ids in, the fused
ranking out (ids with their scores, best first, a tie to the smaller id)."""

from __future__ import annotations

import pytest

from backend.sources.ranking import RRF_K, rrf_fuse


def test_fusion_sums_reciprocal_ranks_and_breaks_ties_by_id() -> None:
    """Fused scores are summed reciprocal ranks, with equal scores ordered by id."""
    bm25 = [3, 1, 2]
    cosine = [2, 4, 3]
    both = 1 / (RRF_K + 1) + 1 / (RRF_K + 3)  # 3: first and third; 2: third, first
    one = 1 / (RRF_K + 2)  # 1 and 4: second in one ranking only
    assert rrf_fuse(bm25, cosine) == [
        (2, pytest.approx(both)),
        (3, pytest.approx(both)),
        (1, pytest.approx(one)),
        (4, pytest.approx(one)),
    ]
    fused = dict(rrf_fuse(bm25, cosine))
    assert fused[2] == fused[3] and fused[1] == fused[4]  # exact ties


def test_a_passage_both_rankings_found_beats_one_found_by_one() -> None:
    """A passage ranked last in one list but present in both outranks the rest."""
    assert [pid for pid, _ in rrf_fuse([7, 8, 9], [9])] == [9, 7, 8]


def test_a_tie_goes_to_the_smaller_id_whatever_ranking_came_first() -> None:
    """Two ids tied on score come out smaller id first, whichever list held it."""
    first = 1 / (RRF_K + 1)
    assert rrf_fuse([5], [4]) == [(4, first), (5, first)]


def test_one_ranking_keeps_its_order_and_k_is_a_parameter() -> None:
    """A lone ranking keeps its order, scored 1/(k + rank) for the `k` given."""
    assert rrf_fuse([30, 10, 20], k=0) == [(30, 1.0), (10, 0.5), (20, 1 / 3)]


def test_no_rankings_or_empty_ones_fuse_to_nothing() -> None:
    """No rankings, or only empty ones, fuse to an empty list."""
    assert rrf_fuse() == []
    assert rrf_fuse([], []) == []
