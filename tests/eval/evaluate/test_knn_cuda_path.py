"""The CUDA k-NN search (`_search_on_device`), run on the CPU against a float64 numpy search written here.

The device code takes a `torch.device`, so everything but the speed is checked without a GPU; the tests at the
end run only where CUDA is available.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import plstitch_eval.knn_vote as knn_module
from plstitch_eval.errors import EvaluationError
from plstitch_eval.knn_vote import KnnConfig, clamp_k, knn_predict

CPU = torch.device("cpu")


def reference_search(train, queries, k):
    """Cosine similarities in float64, full stable sort, the first k: (sims [Q, k], indices [Q, k])."""
    train = train.astype(np.float64)
    queries = queries.astype(np.float64)
    train = train / np.linalg.norm(train, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = queries @ train.T
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1), order


def assert_no_near_ties(train, queries, k):
    """The order of the first k + 1 neighbours is decided by more than float32 rounding."""
    sims, _ = reference_search(train, queries, min(k + 1, len(train)))
    assert np.diff(-sims, axis=1).min() > 1e-5


@pytest.fixture
def data():
    rng = np.random.default_rng(2)
    train = (rng.normal(size=(300, 12)) * rng.lognormal(size=(300, 1))).astype(np.float32)  # not unit rows
    queries = (rng.normal(size=(41, 12)) * 3).astype(np.float32)  # 41: no block size below divides it
    assert_no_near_ties(train, queries, 21)
    return train, queries


@pytest.mark.parametrize("rows", [1, 3, 7, 40, 41, 4096])  # 3, 7, 40 leave a short last block
@pytest.mark.parametrize("k", [1, 5, 20])
def test_device_search_matches_numpy(data, rows, k):
    train, queries = data
    want_sims, want_idx = reference_search(train, queries, k)
    sims, idx = knn_module._search_on_device(train, queries, k, rows, CPU)
    assert sims.dtype == np.float32 and idx.dtype == np.int64
    assert sims.shape == idx.shape == (41, k)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_allclose(sims, want_sims, rtol=0, atol=1e-6)


def test_single_query(data):
    train, queries = data
    want_sims, want_idx = reference_search(train, queries[:1], 20)
    sims, idx = knn_module._search_on_device(train, queries[:1], 20, 7, CPU)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_allclose(sims, want_sims, rtol=0, atol=1e-6)


def test_k_larger_than_train_set_is_clamped_to_every_frame():
    rng = np.random.default_rng(102)
    train = rng.normal(size=(25, 8)).astype(np.float32)
    queries = rng.normal(size=(9, 8)).astype(np.float32)
    assert_no_near_ties(train, queries, 25)
    k = clamp_k(100, len(train))
    want_sims, want_idx = reference_search(train, queries, k)
    sims, idx = knn_module._search_on_device(train, queries, k, 4, CPU)
    assert idx.shape == (9, 25)
    np.testing.assert_array_equal(idx, want_idx)  # every frame once, in similarity order, never -1
    np.testing.assert_allclose(sims, want_sims, rtol=0, atol=1e-6)


def test_inputs_are_left_alone_and_zero_rows_stay_zero(data):
    train, queries = data
    train = train.copy()
    train[5] = 0.0
    keep_train, keep_queries = train.copy(), queries.copy()
    sims, idx = knn_module._search_on_device(train, queries, 300, 16, CPU)
    np.testing.assert_array_equal(train, keep_train)
    np.testing.assert_array_equal(queries, keep_queries)
    assert np.isfinite(sims).all()
    np.testing.assert_array_equal(sims[idx == 5], 0.0)  # a zero row is normalised to zeros, not NaN


@pytest.mark.parametrize(("which", "what"), [("train", "training features"), ("queries", "query features")])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_rows_are_refused_with_the_host_message(data, which, what, value):
    train, queries = (x.copy() for x in data)
    bad = train if which == "train" else queries
    bad[7, 3] = value
    bad[9, 0] = value  # the first bad row is named
    with pytest.raises(EvaluationError) as device:
        knn_module._search_on_device(train, queries, 5, 4, CPU)
    assert str(device.value) == f"{what} row 7 contains NaN or inf; re-extract those features."
    with pytest.raises(EvaluationError) as host:
        knn_module._prepare(bad, what)
    assert str(device.value) == str(host.value)


def test_finite_row_whose_norm_overflows_is_not_refused(data):
    """As on the host: only NaN/inf entries are refused; a row too large to square becomes zeros."""
    train, queries = (x.copy() for x in data)
    train[4] = 1e30
    sims, idx = knn_module._search_on_device(train, queries, 300, 16, CPU)
    np.testing.assert_array_equal(sims[idx == 4], 0.0)


def test_blocks_follow_block_rows(data, monkeypatch):
    train, queries = data
    seen = []
    real_topk = torch.topk

    def spy(block, *args, **kwargs):
        seen.append(tuple(block.shape))
        return real_topk(block, *args, **kwargs)

    monkeypatch.setattr(torch, "topk", spy)
    knn_module._search_on_device(train, queries, 20, 3, CPU)
    assert seen == [(3, len(train))] * 13 + [(2, len(train))]  # 41 queries = 13 blocks of 3 + 2


def _on_cpu(monkeypatch):
    """Route knn_search's CUDA branch to the CPU; record what reaches it."""
    calls = []
    real = knn_module._search_on_device

    def on_cpu(train, queries, k, rows, device):
        calls.append({"train": train, "queries": queries, "k": k, "rows": rows, "device": device})
        return real(train, queries, k, rows, CPU)

    monkeypatch.setattr(knn_module, "_search_on_device", on_cpu)
    return calls


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_cuda_config_takes_the_device_path_with_raw_features(data, monkeypatch, backend):
    train, queries = data
    calls = _on_cpu(monkeypatch)

    def no_host_normalisation(*_args, **_kwargs):
        raise AssertionError("the CUDA path must not normalise on the host")

    monkeypatch.setattr(knn_module, "_prepare", no_host_normalisation)
    knn_module.knn_search(train, queries, 500, chunk_size=7, device="cuda", backend=backend)
    (call,) = calls
    assert call["train"] is train and call["queries"] is queries  # float32 C-contiguous: no host copy
    assert call["k"] == len(train) and call["rows"] == 7 and call["device"] == torch.device("cuda")


@pytest.mark.parametrize("weighting", ["exp", "similarity", "uniform"])
@pytest.mark.parametrize("k", [1, 7, 20, 500])
def test_predictions_equal_faiss(data, monkeypatch, weighting, k):
    pytest.importorskip("faiss")
    rng = np.random.default_rng(5)
    train, queries = data
    labels = rng.integers(0, 5, len(train))
    _on_cpu(monkeypatch)
    want, want_votes = knn_predict(
        train, labels, queries, KnnConfig(k=k, weighting=weighting, backend="faiss"), return_scores=True
    )
    config = KnnConfig(k=k, weighting=weighting, chunk_size=7, device="cuda")
    got, votes = knn_predict(train, labels, queries, config, return_scores=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(votes, want_votes, rtol=1e-5, atol=1e-6)


def test_errors_through_knn_search(data, monkeypatch):
    train, queries = data
    _on_cpu(monkeypatch)
    bad = queries.copy()
    bad[3, 2] = np.nan
    with pytest.raises(EvaluationError, match="query features row 3 contains NaN or inf"):
        knn_module.knn_search(train, bad, 5, device="cuda")
    with pytest.raises(EvaluationError, match="12-d but queries are 5-d"):
        knn_module.knn_search(train, queries[:, :5], 5, device="cuda")
    with pytest.raises(EvaluationError, match="must be a \\[N, D\\] matrix"):
        knn_module.knn_search(train[0], queries, 5, device="cuda")
    with pytest.raises(EvaluationError, match="training split is empty"):
        knn_module.knn_search(train[:0], queries, 5, device="cuda")


# On a CUDA device: the same answers, and no host sync between the copy in and the copy out.

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
@pytest.mark.parametrize("rows", [7, 4096])
def test_cuda_matches_numpy(data, rows):
    train, queries = data
    want_sims, want_idx = reference_search(train, queries, 20)
    sims, idx = knn_module._search_on_device(train, queries, 20, rows, torch.device("cuda"))
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_allclose(sims, want_sims, rtol=0, atol=1e-6)


@needs_cuda
def test_cuda_predictions_equal_faiss_and_cpu_torch(data):
    rng = np.random.default_rng(6)
    train = rng.normal(size=(5000, 64)).astype(np.float32)
    labels = rng.integers(0, 10, len(train))
    queries = rng.normal(size=(1001, 64)).astype(np.float32)
    cpu = knn_predict(train, labels, queries, KnnConfig(k=20, backend="torch", chunk_size=64))
    cuda = knn_predict(train, labels, queries, KnnConfig(k=20, device="cuda", chunk_size=64))
    np.testing.assert_array_equal(cuda, cpu)
    pytest.importorskip("faiss")
    np.testing.assert_array_equal(cuda, knn_predict(train, labels, queries, KnnConfig(k=20)))


@needs_cuda
def test_cuda_blocks_never_sync_with_the_host(data, monkeypatch):
    """From the first block's top-k to the last, any host sync raises (``torch.cuda.set_sync_debug_mode``)."""
    train, queries = data
    n_blocks = -(-len(queries) // 3)
    real_topk = torch.topk
    calls = []

    def strict(block, *args, **kwargs):
        torch.cuda.set_sync_debug_mode("error")
        out = real_topk(block, *args, **kwargs)
        calls.append(block.shape[0])
        if len(calls) == n_blocks:
            torch.cuda.set_sync_debug_mode("default")
        return out

    monkeypatch.setattr(torch, "topk", strict)
    try:
        sims, idx = knn_module._search_on_device(train, queries, 20, 3, torch.device("cuda"))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert len(calls) == n_blocks
    np.testing.assert_array_equal(idx, reference_search(train, queries, 20)[1])
