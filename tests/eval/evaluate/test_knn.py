"""k-NN against a brute-force numpy version of the DINO protocol written here."""

from __future__ import annotations

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.knn_vote import KnnConfig, knn_predict, knn_predict_multi


def brute_knn(train, labels, queries, k, temperature, weighting, num_classes):
    """Textbook weighted k-NN: cosine similarities, full sort, top-k votes, argmax (lowest id on ties)."""
    train = train / np.linalg.norm(train, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    k = min(k, len(train))
    preds, all_votes = [], []
    for q in queries:
        sims = train @ q
        top = np.argsort(-sims, kind="stable")[:k]
        votes = np.zeros(num_classes)
        for j in top:
            if weighting == "exp":
                votes[labels[j]] += np.exp(sims[j] / temperature)
            elif weighting == "similarity":
                votes[labels[j]] += sims[j]
            else:
                votes[labels[j]] += 1.0
        best = max(range(num_classes), key=lambda c: (votes[c], -c))  # highest vote, then lowest id
        preds.append(best)
        all_votes.append(votes)
    return np.array(preds), np.array(all_votes)


@pytest.fixture
def data():
    rng = np.random.default_rng(1)
    train = rng.normal(size=(300, 12)).astype(np.float32)
    labels = rng.integers(0, 5, 300)
    queries = rng.normal(size=(40, 12)).astype(np.float32)
    return train, labels, queries


@pytest.mark.parametrize("weighting", ["exp", "similarity", "uniform"])
@pytest.mark.parametrize("k", [1, 7, 20])
def test_matches_brute_force(data, weighting, k):
    train, labels, queries = data
    want, want_votes = brute_knn(train, labels, queries, k, 0.07, weighting, 5)
    config = KnnConfig(k=k, weighting=weighting, chunk_size=7)
    got, votes = knn_predict(train, labels, queries, config, num_classes=5, return_scores=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(votes, want_votes, rtol=1e-4, atol=1e-6)


def test_torch_backend_equals_faiss(data):
    train, labels, queries = data
    a = knn_predict(train, labels, queries, KnnConfig(k=10, backend="faiss"))
    b = knn_predict(train, labels, queries, KnnConfig(k=10, backend="torch", chunk_size=9))
    np.testing.assert_array_equal(a, b)


def test_several_k_from_one_search(data):
    train, labels, queries = data
    multi = knn_predict_multi(train, labels, queries, KnnConfig(temperature=0.1), ks=[1, 5, 50])
    for k in (1, 5, 50):
        alone = knn_predict(train, labels, queries, KnnConfig(k=k, temperature=0.1))
        np.testing.assert_array_equal(multi[k], alone)


@pytest.mark.parametrize("weighting", ["exp", "similarity", "uniform"])
def test_k_larger_than_train_set_uses_all_neighbours(weighting):
    rng = np.random.default_rng(2)
    train = rng.normal(size=(6, 4)).astype(np.float32)
    labels = np.array([0, 1, 1, 2, 2, 2])
    queries = rng.normal(size=(5, 4)).astype(np.float32)
    want, want_votes = brute_knn(train, labels, queries, 100, 0.07, weighting, 3)
    config = KnnConfig(k=100, weighting=weighting)
    got, votes = knn_predict(train, labels, queries, config, return_scores=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(votes, want_votes, rtol=1e-5)
    if weighting == "uniform":
        np.testing.assert_array_equal(votes, np.tile([1.0, 2.0, 3.0], (5, 1)))  # never a -1 index


@pytest.mark.parametrize("weighting", ["exp", "similarity", "uniform"])
def test_vote_tie_goes_to_lowest_class(weighting):
    train = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], np.float32)
    labels = np.array([3, 1, 0])
    # Both neighbours at k=2 are identical vectors with classes 3 and 1: equal votes -> class 1.
    query = np.array([[2.0, 0.0]], np.float32)
    assert knn_predict(train, labels, query, KnnConfig(k=2, weighting=weighting))[0] == 1


def test_num_classes_sizes_votes(data):
    train, labels, queries = data
    _, votes = knn_predict(train, labels, queries, KnnConfig(k=3), num_classes=9, return_scores=True)
    assert votes.shape == (40, 9)
    assert (votes[:, 5:] == 0).all()


def test_bad_inputs_are_clear_errors(data):
    train, labels, queries = data
    bad = queries.copy()
    bad[3, 2] = np.nan
    with pytest.raises(EvaluationError, match="row 3"):
        knn_predict(train, labels, bad)
    with pytest.raises(EvaluationError, match="labels"):
        knn_predict(train, labels[:-1], queries)
    with pytest.raises(EvaluationError, match="12-d"):
        knn_predict(train, labels, queries[:, :5])
    with pytest.raises(ConfigError, match="weighting"):
        knn_predict(train, labels, queries, KnnConfig(weighting="cosine"))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"weighting": "cosine"}, "weighting 'cosine' unknown; choose one of exp, similarity, uniform"),
        ({"backend": "annoy"}, "backend 'annoy' unknown; choose one of auto, faiss, torch"),
        ({"k": 0}, "k must be >= 1"),
        ({"temperature": 0.0}, "temperature must be > 0"),
        ({"chunk_size": 0}, "chunk_size must be >= 1"),
        ({"num_threads": 0}, "num_threads must be >= 1"),
    ],
)
def test_config_is_checked_on_construction(changes, message):
    with pytest.raises(ConfigError, match=message) as info:
        KnnConfig(**changes)
    assert "\n" not in str(info.value)


def _faiss_search_unclamped(train, queries, k, *_args, **_kwargs):
    """Raw FAISS search for k neighbours, k > ntotal allowed: FAISS pads with index -1 and -FLT_MAX."""
    import faiss

    train = np.ascontiguousarray(train, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    faiss.normalize_L2(train)
    faiss.normalize_L2(queries)
    index = faiss.IndexFlatIP(train.shape[1])
    index.add(train)
    return index.search(queries, k)


@pytest.mark.parametrize("weighting", ["exp", "similarity", "uniform"])
def test_padded_faiss_neighbours_never_vote(weighting, monkeypatch):
    """FAISS returns index -1 when asked for more neighbours than it holds; such slots must never vote.

    The search is replaced by an unclamped one, so the padding reaches the voting (with index -1 taken
    literally it would vote for the last training frame's class).
    """
    import plstitch_eval.knn_vote as knn_module

    rng = np.random.default_rng(3)
    train = rng.normal(size=(6, 4)).astype(np.float32)
    labels = np.array([0, 0, 1, 1, 1, 2])  # the last frame's class (2) is the rarest
    queries = rng.normal(size=(9, 4)).astype(np.float32)
    sims, idx = _faiss_search_unclamped(train, queries, 10)
    assert (idx[:, 6:] == -1).all()  # the padding this test is about really happens
    monkeypatch.setattr(knn_module, "knn_search", _faiss_search_unclamped)
    want, want_votes = brute_knn(train, labels, queries, 10, 0.07, weighting, 3)
    got, votes = knn_predict_multi(
        train, labels, queries, KnnConfig(weighting=weighting), ks=[4, 10], return_scores=True
    )
    np.testing.assert_array_equal(got[10], want)
    np.testing.assert_allclose(votes[10], want_votes, rtol=1e-5)
    np.testing.assert_allclose(
        votes[4], brute_knn(train, labels, queries, 4, 0.07, weighting, 3)[1], rtol=1e-5
    )


# Blocked search (torch: the default on CUDA; FAISS: the default on CPU): the same answers in any block size.


@pytest.mark.parametrize("weighting", ["exp", "similarity", "uniform"])
@pytest.mark.parametrize("chunk_size", [1, 7, 40, 4096])  # 7 does not divide the 40 queries
@pytest.mark.parametrize("k", [5, 20, 500])  # 500 > 300 training frames: clamped to all of them
def test_blocked_search_matches_brute_force(data, weighting, chunk_size, k):
    train, labels, queries = data
    want, want_votes = brute_knn(train, labels, queries, k, 0.07, weighting, 5)
    config = KnnConfig(k=k, weighting=weighting, chunk_size=chunk_size, backend="torch")
    got, votes = knn_predict(train, labels, queries, config, num_classes=5, return_scores=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(votes, want_votes, rtol=1e-4, atol=1e-6)
    faiss_config = KnnConfig(k=k, weighting=weighting, chunk_size=chunk_size, backend="faiss")
    np.testing.assert_array_equal(knn_predict(train, labels, queries, faiss_config), want)


def test_block_rows_bounds_the_similarity_block(data, monkeypatch):
    import torch

    import plstitch_eval.knn_vote as knn_module

    assert knn_module.block_rows(100_000, 4096) == 2**26 // 100_000
    assert knn_module.block_rows(10, 4096) == 4096
    assert knn_module.block_rows(10**9, 4096) == 1
    train, labels, queries = data
    monkeypatch.setattr(knn_module, "MAX_BLOCK_ELEMENTS", 3 * len(train))  # 3 query rows per block
    seen = []
    real_topk = torch.topk

    def spy(block, *args, **kwargs):
        seen.append(tuple(block.shape))
        return real_topk(block, *args, **kwargs)

    monkeypatch.setattr(torch, "topk", spy)
    want, _ = brute_knn(train, labels, queries, 20, 0.07, "exp", 5)
    config = KnnConfig(chunk_size=4096, backend="torch")
    np.testing.assert_array_equal(knn_predict(train, labels, queries, config), want)
    assert seen == [(3, len(train))] * 13 + [(1, len(train))]  # 40 queries = 13 blocks of 3 + 1


def test_auto_backend_on_cpu_is_faiss(data, monkeypatch):
    import plstitch_eval.knn_vote as knn_module

    def no_torch(*_args, **_kwargs):
        raise AssertionError("backend='auto' on CPU must use FAISS")

    monkeypatch.setattr(knn_module, "_search_torch", no_torch)
    train, labels, queries = data
    knn_predict(train, labels, queries, KnnConfig(k=5))


def test_num_threads_is_restored(data):
    import torch

    train, labels, queries = data
    before = torch.get_num_threads()
    knn_predict(train, labels, queries, KnnConfig(k=5, num_threads=1, backend="torch"))
    assert torch.get_num_threads() == before


def test_prepare_is_division_by_the_norm_and_leaves_input_alone():
    from plstitch_eval.knn_vote import _prepare

    rng = np.random.default_rng(4)
    x = (rng.normal(size=(50, 16)) * rng.lognormal(size=(50, 1))).astype(np.float32)
    x[3] = 0.0
    keep = x.copy()
    want = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    got = _prepare(x, "x")
    assert got.tobytes() == want.astype(np.float32).tobytes()  # bit for bit, zero row stays zero
    np.testing.assert_array_equal(x, keep)
    assert _prepare(x.astype(np.float64), "x").tobytes() == got.tobytes()
    big = x.copy()
    big[7, 1] = np.inf
    with pytest.raises(EvaluationError, match="row 7"):
        _prepare(big, "x")
