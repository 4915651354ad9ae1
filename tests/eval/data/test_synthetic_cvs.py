"""The synthetic critical view of safety: three raters judging what the frames show, and disagreeing."""

import numpy as np

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import SyntheticConfig, phase_timeline
from plstitch_eval.data.synthetic_cvs import CRITERIA, RATER_BIAS, SLIP, cvs_ratings


def _by_hand(phases: np.ndarray, fps: int, every: int) -> tuple[list[int], np.ndarray]:
    """The raters' noiseless calls, frame by frame from the anatomy's rules written out here."""
    rows, ids = [], []
    for i in range(0, len(phases), every):
        p = phases[i]
        if p > 3:
            continue
        first = int(np.argmax(phases == p))
        length = int((phases == p).sum())
        q = (i - first) / length
        fat = 1.0 if p == 0 else (1.0 - 0.85 * q if p == 1 else 0.15)
        detach = 0.0 if p < 3 else q
        cleared = 1.0 - fat
        calls = [
            [cleared > 0.45 + b, cleared > 0.75 + b, detach > 0.3 + b] for b in RATER_BIAS
        ]  # lenient, middling, strict
        rows.append(calls)
        ids.append(i)
    return ids, np.asarray(rows, np.int8)


def test_ratings_follow_the_anatomy_and_the_raters_slip_a_little():
    config = SyntheticConfig()
    for v in range(4):
        phases = phase_timeline(np.random.default_rng([0, v]), config)
        times, ratings = cvs_ratings(phases, config.fps, np.random.default_rng(v), every_s=1.0)
        ids, clean = _by_hand(phases, config.fps, config.fps)
        np.testing.assert_allclose(times, np.asarray(ids) / config.fps)
        assert ratings.shape == (len(ids), 3, len(CRITERIA)) and ratings.dtype == np.int8
        slips = np.random.default_rng(v).random(clean.shape) < SLIP
        np.testing.assert_array_equal(ratings, np.where(slips, 1 - clean, clean))
        assert 0 < slips.sum() < 0.15 * slips.size


def test_raters_disagree_and_the_criteria_come_in_order():
    config = SyntheticConfig()
    soft = []
    for v in range(6):
        phases = phase_timeline(np.random.default_rng([0, v]), config)
        _, ratings = cvs_ratings(phases, config.fps, np.random.default_rng(v))
        soft.append(ratings.mean(axis=1))
    soft = np.concatenate(soft)
    assert ((soft > 0) & (soft < 1)).any(axis=0).all()  # each criterion has frames the raters split on
    met = (soft >= 0.5).mean(axis=0)
    assert met[0] > met[1] > met[2] > 0  # two structures before a cleared triangle before the plate


def test_the_dataset_is_synthetic_plus_the_raters_mean(tmp_path):
    tiny = {"n_videos": 3, "size": 32, "min_seconds": 3.0, "max_seconds": 5.0, "workers": 1}
    plain = get_dataset("synthetic", root=tmp_path, **tiny)
    rated = get_dataset("synthetic-cvs", root=tmp_path, **tiny)
    assert rated.root == plain.root  # the same generated folder
    for v, (a, b) in enumerate(zip(plain.videos(), rated.videos(), strict=True)):
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.cvs is None
        times, ratings = cvs_ratings(b.labels, b.label_fps, np.random.default_rng([0, v, 2]))
        np.testing.assert_allclose(b.cvs_times, times)
        np.testing.assert_allclose(b.cvs, ratings.mean(axis=1))
        assert set(np.unique(b.cvs * 3).round(6)) <= {0.0, 1.0, 2.0, 3.0}
