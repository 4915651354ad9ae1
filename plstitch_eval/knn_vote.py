"""Weighted k-NN classification on frozen features (DINO / iBOT / DINOv2 protocol).

Features are L2-normalised; the k most cosine-similar training frames vote for their class with weight
``exp(sim / T)`` (``weighting="exp"``, DINO's default, T = 0.07), ``sim`` (``"similarity"``, the paper text's
wording) or 1 (``"uniform"``). The prediction is the argmax of the summed votes; on an exact tie the lowest
class id wins (numpy/torch argmax). One search with the largest k serves several k. ``k > n_train`` is
clipped to ``n_train`` (``clamp_k``; the protocols warn and record both values), and a neighbour slot
without a training frame (FAISS pads with index -1 when k > ntotal) never votes.

Backends (both exact fp32, both blocked, so memory is bounded by the block, not the query count):
``"faiss"``, ``IndexFlatIP`` searched ``chunk_size`` queries at a time, its thread count set explicitly
(``num_threads``, default all cores); ``"torch"``, one GEMM per query block into a reused [rows, n_train]
buffer followed by ``torch.topk`` (``block_rows``: ``chunk_size`` rows, at most 2**26 floats), on CPU with
``num_threads`` if given. On CUDA the torch backend (``_search_on_device``) copies the raw float32 features
to the GPU once, normalises them and checks for NaN/inf there, and writes each block's top-k into one
preallocated [Q, k] device result fetched once at the end: host-side normalisation and a host sync per block
had made it 5x its bare GEMM. ``"auto"`` (the default) is FAISS on CPU and torch on CUDA: on the 2-core
development box FAISS's selection, fused into its BLAS blocks, measured at 0.91-1.07x the bare similarity
GEMM and the torch path at 1.07-1.19x (``benchmarks/knn.py`` prints both ratios). Every setting lives in
``KnnConfig``, checked on construction; ``knn_predict(train, labels, queries, config)`` takes it whole.

macOS: torch and faiss-cpu each bundle an OpenMP runtime and the process can abort with "OMP: Error #15";
the usual workaround is ``export KMP_DUPLICATE_LIB_OK=TRUE`` (or installing both from conda-forge, which
share one runtime).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from plstitch_eval.errors import ConfigError, EvaluationError

WEIGHTINGS = ("exp", "similarity", "uniform")
BACKENDS = ("auto", "faiss", "torch")
MAX_BLOCK_ELEMENTS = 2**26  # floats in one [query rows, n_train] similarity block (256 MiB)


@dataclass
class KnnConfig:
    """Settings of the k-NN protocol, checked on construction (ConfigError names the field and choices)."""

    k: int = 20
    temperature: float = 0.07
    weighting: str = field(default="exp", metadata={"choices": WEIGHTINGS})
    chunk_size: int = 4096
    device: str = "cpu"
    backend: str = field(default="auto", metadata={"choices": BACKENDS})
    num_threads: int | None = None

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise ConfigError(
                f"k-NN weighting {self.weighting!r} unknown; choose one of {', '.join(WEIGHTINGS)}."
            )
        if self.backend not in BACKENDS:
            raise ConfigError(f"k-NN backend {self.backend!r} unknown; choose one of {', '.join(BACKENDS)}.")
        if self.k < 1:
            raise ConfigError(f"k-NN k must be >= 1 (got {self.k}).")
        if not self.temperature > 0:
            raise ConfigError(f"k-NN temperature must be > 0 (got {self.temperature}).")
        if self.chunk_size < 1:
            raise ConfigError(f"k-NN chunk_size must be >= 1 (got {self.chunk_size}).")
        if self.num_threads is not None and self.num_threads < 1:
            raise ConfigError(f"k-NN num_threads must be >= 1 or unset (got {self.num_threads}).")


def clamp_k(k: int, n_train: int) -> int:
    """The k a search over `n_train` training frames uses: ``min(k, n_train)``.

    Why: there are no more neighbours than training frames; callers report the k actually used.
    """
    return min(int(k), int(n_train))


def _as_matrix(x: np.ndarray, what: str) -> np.ndarray:
    """`x` as a C-contiguous float32 [N, D] array (no copy when it already is one)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise EvaluationError(f"{what} must be a [N, D] matrix, got shape {x.shape}.")
    return x


def _non_finite_message(what: str, row: int) -> str:
    return f"{what} row {row} contains NaN or inf; re-extract those features."


def _prepare(x: np.ndarray, what: str) -> np.ndarray:
    """C-contiguous float32 copy, L2-normalised row-wise; NaN/inf refused.

    One read for the norms (a non-finite entry makes its row's norm non-finite, so the element-wise check
    runs only then) and one multi-threaded divide into the copy: the same float32 values as ``x / norm``.
    """
    x = _as_matrix(x, what)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if not np.isfinite(norms).all() and not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(1))[0])
        raise EvaluationError(_non_finite_message(what, bad))
    out = np.empty_like(x)
    torch.div(torch.from_numpy(x), torch.from_numpy(np.maximum(norms, 1e-12)), out=torch.from_numpy(out))
    return out


def _search_faiss(
    train: np.ndarray, queries: np.ndarray, k: int, chunk_size: int, num_threads: int | None
) -> tuple[np.ndarray, np.ndarray]:
    # lazy: the torch backend runs where FAISS is not installed (the lent GPU machine has none)
    import faiss

    faiss.omp_set_num_threads(int(num_threads or os.cpu_count() or 1))
    index = faiss.IndexFlatIP(train.shape[1])
    index.add(train)
    sims = np.empty((len(queries), k), dtype=np.float32)
    idx = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), chunk_size):
        stop = start + chunk_size
        sims[start:stop], idx[start:stop] = index.search(queries[start:stop], k)
    return sims, idx


def block_rows(n_train: int, chunk_size: int) -> int:
    """Query rows per similarity block: ``chunk_size``, capped so one block holds <= 2**26 floats (256 MiB).

    Why: the [rows, n_train] block is written by the GEMM and read once by top-k; a bounded block keeps memory
    bounded by the block size, not the query count (100k training frames: blocks of 671 queries).
    """
    return max(1, min(int(chunk_size), MAX_BLOCK_ELEMENTS // max(int(n_train), 1)))


def _search_torch(
    train: np.ndarray, queries: np.ndarray, k: int, chunk_size: int, device: str, num_threads: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Blocked exact search on host-normalised features: per query block one GEMM into a reused buffer, then
    ``torch.topk``. The CPU (and non-CUDA) torch path; CUDA goes through ``_search_on_device``."""
    dev = torch.device(device)
    rows = block_rows(len(train), chunk_size)
    old_threads = torch.get_num_threads()
    if num_threads is not None and dev.type == "cpu":
        torch.set_num_threads(int(num_threads))
    try:
        bank_t = torch.from_numpy(train).to(dev, non_blocking=True).T
        buf = torch.empty((min(rows, len(queries)), len(train)), dtype=torch.float32, device=dev)
        sims = np.empty((len(queries), k), dtype=np.float32)
        idx = np.empty((len(queries), k), dtype=np.int64)
        with torch.no_grad():
            for start in range(0, len(queries), rows):
                q = torch.from_numpy(queries[start : start + rows])
                q = q.to(dev, non_blocking=True)
                block = torch.mm(q, bank_t, out=buf[: len(q)])
                s, i = torch.topk(block, k, dim=1, largest=True, sorted=True)
                sims[start : start + len(q)] = s.cpu().numpy()
                idx[start : start + len(q)] = i.cpu().numpy()
    finally:
        torch.set_num_threads(old_threads)
    return sims, idx


def _normalised_on_device(x: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw float32 rows copied once to `device` and L2-normalised there in place (``x / max(norm, 1e-12)``,
    as ``_prepare``), with a 0-d device flag: whether every row's norm is finite (read by the caller, so both
    inputs' checks cost one host sync). Always a fresh tensor: the caller's array is never written."""
    t = torch.empty(x.shape, dtype=torch.float32, device=device)
    t.copy_(torch.from_numpy(x))
    norms = torch.linalg.vector_norm(t, dim=1, keepdim=True)
    finite = torch.isfinite(norms).all()
    t.div_(norms.clamp_min_(1e-12))
    return t, finite


def _first_non_finite_row(t: torch.Tensor) -> int | None:
    """First row whose raw features held a NaN or inf, or None (finite rows whose norm overflowed to inf).

    Read off the normalised `t`: such a row holds NaN there (NaN, or inf / inf), while a finite row stays
    finite (an overflowed norm turns it into zeros, as on the host)."""
    bad = torch.nonzero(~torch.isfinite(t).all(1))
    return int(bad[0, 0]) if len(bad) else None


def _search_on_device(
    train: np.ndarray, queries: np.ndarray, k: int, rows: int, device: torch.device
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k cosine search of raw float32 `queries` [Q, D] in raw `train` [N, D] with all work on
    `device`: sims [Q, k] (float32) and training indices [Q, k] (int64), most similar first; ``k <= N``.

    What: both matrices are copied to the device once, L2-normalised and checked for NaN/inf there (one host
    sync for the check), then per block of `rows` queries one GEMM into a reused [rows, N] buffer and a
    ``torch.topk`` written straight into preallocated [Q, k] device results, copied to the host once at the
    end. Why: on CUDA, host-side normalisation, a fresh pinned block per query block and a device-to-host copy
    per block (a sync that stalls the GPU) made the search 5x its bare GEMM; now nothing waits on the host
    between blocks. Device memory: bank + queries + one similarity block + the results. Written against a
    `torch.device`, so the same code runs on the CPU in the tests.
    """
    with torch.no_grad():
        bank, bank_ok = _normalised_on_device(train, device)
        q_all, q_ok = _normalised_on_device(queries, device)
        all_ok = torch.stack((bank_ok, q_ok)).tolist()  # the one host sync before the search
        for ok, t, what in ((all_ok[0], bank, "training features"), (all_ok[1], q_all, "query features")):
            if not ok:
                bad = _first_non_finite_row(t)
                if bad is not None:
                    raise EvaluationError(_non_finite_message(what, bad))
        n_queries = len(q_all)
        sims = torch.empty((n_queries, k), dtype=torch.float32, device=device)
        idx = torch.empty((n_queries, k), dtype=torch.int64, device=device)
        buf = torch.empty((min(rows, n_queries), len(bank)), dtype=torch.float32, device=device)
        bank_t = bank.T
        for start in range(0, n_queries, rows):
            stop = min(start + rows, n_queries)
            block = torch.mm(q_all[start:stop], bank_t, out=buf[: stop - start])
            torch.topk(block, k, dim=1, largest=True, sorted=True, out=(sims[start:stop], idx[start:stop]))
        return sims.cpu().numpy(), idx.cpu().numpy()


def _checked_k(train: np.ndarray, queries: np.ndarray, k: int) -> int:
    """The k to search with (``clamp_k``) after the shape checks both backends share."""
    if len(train) == 0:
        raise EvaluationError("No training frames for k-NN; the training split is empty.")
    if train.shape[1] != queries.shape[1]:
        raise EvaluationError(
            f"Training features are {train.shape[1]}-d but queries are {queries.shape[1]}-d; "
            "both must come from the same encoder."
        )
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}.")
    return clamp_k(k, len(train))


def knn_search(
    train_feats: np.ndarray,
    test_feats: np.ndarray,
    k: int,
    chunk_size: int = 4096,
    device: str = "cpu",
    backend: str = "auto",
    num_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k cosine similarities and training indices [Q, min(k, n_train)], most similar first."""
    if backend == "auto":
        backend = "torch" if str(device).startswith("cuda") else "faiss"
    if backend == "torch" and torch.device(device).type == "cuda":
        # raw features go to the GPU, normalised there (_search_on_device), not on the host
        train = _as_matrix(train_feats, "training features")
        queries = _as_matrix(test_feats, "query features")
        k = _checked_k(train, queries, k)
        return _search_on_device(train, queries, k, block_rows(len(train), chunk_size), torch.device(device))
    train = _prepare(train_feats, "training features")
    queries = _prepare(test_feats, "query features")
    k = _checked_k(train, queries, k)
    if backend == "faiss":
        return _search_faiss(train, queries, k, chunk_size, num_threads)
    if backend == "torch":
        return _search_torch(train, queries, k, chunk_size, device, num_threads)
    raise ConfigError(f"Unknown k-NN backend {backend!r}; use auto, faiss or torch.")


def neighbour_weights(
    sims: np.ndarray, temperature: float = 0.07, weighting: str = "exp", valid: np.ndarray | None = None
) -> np.ndarray:
    """Each neighbour's weight [Q, k] (float64): exp(sim / T) (DINO), the similarity, or 1; 0 where not
    `valid`. Why one place: the class vote and k-NN regression weigh neighbours alike."""
    if weighting == "exp":
        if temperature <= 0:
            raise ConfigError(f"temperature must be > 0, got {temperature}.")
        weights = np.exp(sims.astype(np.float64) / temperature)
    elif weighting == "similarity":
        weights = sims.astype(np.float64)
    elif weighting == "uniform":
        weights = np.ones(sims.shape, dtype=np.float64)
    else:
        raise ConfigError(f"Unknown k-NN weighting {weighting!r}; choose one of {', '.join(WEIGHTINGS)}.")
    return weights if valid is None else np.where(valid, weights, 0.0)


def vote(
    sims: np.ndarray,
    neighbour_labels: np.ndarray,
    num_classes: int,
    temperature: float = 0.07,
    weighting: str = "exp",
    valid: np.ndarray | None = None,
) -> np.ndarray:
    """Summed class votes [Q, C] (float64) from neighbour similarities and labels [Q, k].

    `valid` [Q, k] marks real neighbours; a False slot (FAISS index -1, similarity -FLT_MAX) gets weight 0.
    """
    weights = neighbour_weights(sims, temperature, weighting, valid)
    if valid is not None:
        neighbour_labels = np.where(valid, neighbour_labels, 0)
    n_queries = len(sims)
    rows = np.repeat(np.arange(n_queries, dtype=np.int64), sims.shape[1])
    flat = rows * num_classes + neighbour_labels.reshape(-1)
    scores = np.bincount(flat, weights=weights.reshape(-1), minlength=n_queries * num_classes)
    return scores.reshape(n_queries, num_classes)


def _check_labels(train_feats: np.ndarray, train_labels: np.ndarray, num_classes: int | None) -> int:
    train_labels = np.asarray(train_labels)
    if len(train_labels) != len(train_feats):
        raise EvaluationError(
            f"{len(train_feats)} training feature rows but {len(train_labels)} labels; one label per frame."
        )
    if len(train_labels) and train_labels.min() < 0:
        raise EvaluationError("Training labels contain negative ids; drop unlabelled frames first.")
    needed = int(train_labels.max(initial=-1)) + 1
    if num_classes is not None and num_classes < needed:
        raise EvaluationError(f"num_classes={num_classes} but training labels go up to {needed - 1}.")
    return int(num_classes or needed)


def knn_predict_multi(
    train_feats: np.ndarray,
    train_labels: np.ndarray,
    test_feats: np.ndarray,
    config: KnnConfig | None = None,
    ks: Sequence[int] | None = None,
    *,
    num_classes: int | None = None,
    return_scores: bool = False,
) -> dict[int, np.ndarray] | tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Predictions for several k (default ``config.k`` alone) from one search with the largest k.

    Returns ``{k: labels [Q]}``, with ``return_scores`` also ``{k: votes [Q, C]}``. ``num_classes`` sizes the
    votes (default: the largest training label + 1).
    """
    config = config or KnnConfig()
    ks = [config.k] if ks is None else list(ks)
    if not ks or min(ks) < 1:
        raise ConfigError(f"k-NN ks must be one or more values >= 1 (got {ks}).")
    n_classes = _check_labels(train_feats, train_labels, num_classes)
    train_labels = np.asarray(train_labels, dtype=np.int64)
    sims, idx = knn_search(
        train_feats, test_feats, max(ks), config.chunk_size, config.device, config.backend, config.num_threads
    )
    valid = idx >= 0  # FAISS pads with -1 when asked for more neighbours than it holds
    neighbour_labels = train_labels[np.where(valid, idx, 0)]
    preds, scores = {}, {}
    for k in ks:
        kk = min(int(k), sims.shape[1])
        votes = vote(
            sims[:, :kk],
            neighbour_labels[:, :kk],
            n_classes,
            config.temperature,
            config.weighting,
            valid[:, :kk],
        )
        preds[int(k)] = votes.argmax(1)
        if return_scores:
            scores[int(k)] = votes
    return (preds, scores) if return_scores else preds


def knn_predict(
    train_feats: np.ndarray,
    train_labels: np.ndarray,
    test_feats: np.ndarray,
    config: KnnConfig | None = None,
    *,
    num_classes: int | None = None,
    return_scores: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Predicted class per query frame [Q] by weighted k-NN voting with ``config`` (default ``KnnConfig()``).

    With ``return_scores`` also the summed votes [Q, C].
    """
    config = config or KnnConfig()
    out = knn_predict_multi(
        train_feats, train_labels, test_feats, config, num_classes=num_classes, return_scores=return_scores
    )
    if return_scores:
        preds, scores = out
        return preds[config.k], scores[config.k]
    return out[config.k]
