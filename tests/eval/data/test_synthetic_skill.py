"""A skilled synthetic set: each case has a surgeon whose skill shows in how the instruments move."""

import json

import numpy as np
import pytest

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import (
    PARAMS_FILE,
    SKILL_DIR,
    SKILL_PARTS,
    SKILL_SUFFIX,
    SyntheticConfig,
    case_skill,
    generate_synthetic,
    phase_timeline,
    skill_key,
)
from plstitch_eval.data.synthetic_scene import Scene
from plstitch_eval.errors import DataError

TINY = {"n_videos": 4, "size": 32, "min_seconds": 2.0, "max_seconds": 4.0, "workers": 1}


def test_plain_params_unchanged_and_skilled_hashed_apart():
    plain = SyntheticConfig()
    assert "skilled" not in plain.params()
    skilled = SyntheticConfig(skilled=True)
    assert skilled.params() == plain.params() | {"skilled": True} and skilled.digest() != plain.digest()


def test_the_rating_parts_follow_the_level_and_sum_to_the_grs():
    config = SyntheticConfig(skilled=True)
    skills = [case_skill(config, v) for v in range(24)]
    assert skills == [case_skill(config, v) for v in range(24)]  # reproducible
    levels = np.array([s.level for s in skills])
    grs = np.array([s.grs for s in skills])
    for s in skills:
        assert len(s.parts) == len(SKILL_PARTS) and all(1 <= p <= 5 for p in s.parts)
        assert s.grs == sum(s.parts) and 6 <= s.grs <= 30
    # ranks by hand (no ties in the levels): the score rises with the level
    rank_l, rank_g = levels.argsort().argsort(), grs.argsort(kind="stable").argsort()
    assert np.corrcoef(rank_l, rank_g)[0, 1] > 0.8
    assert grs.std() > 3  # the cases differ


def _twin(skill: float | None) -> Scene:
    config = SyntheticConfig(size=32, fps=5, min_seconds=8.0, max_seconds=20.0)
    rng = np.random.default_rng([0, 2])
    return Scene(rng, 32, phase_timeline(rng, config), 5.0, skill=skill)


def test_a_novice_wanders_further_and_all_else_is_the_plain_scene():
    plain, novice, expert = _twin(None), _twin(0.0), _twin(1.0)
    np.testing.assert_array_equal(plain.noise_bank, novice.noise_bank)  # drawn last: the stream was kept
    np.testing.assert_array_equal(plain.pan, novice.pan)
    ids = np.arange(len(plain.phases))
    np.testing.assert_array_equal(plain.tool_presence(ids), expert.tool_presence(ids))

    def spread(scene: Scene) -> float:
        return float(np.mean([tips.std(axis=0).mean() for *_, tips, _present in scene.tools]))

    assert spread(novice) > 2 * spread(expert)


def test_generated_files_hold_each_cases_score(tmp_path):
    folder = generate_synthetic(tmp_path / "s", skilled=True, **TINY)
    assert json.loads((folder / PARAMS_FILE).read_text())["skilled"] is True
    config = SyntheticConfig(4, 32, 0, 25, 2.0, 4.0, skilled=True)
    for v in range(4):
        lines = (folder / SKILL_DIR / f"video{v + 1:02d}{SKILL_SUFFIX}").read_text().splitlines()
        assert lines[0].split("\t") == ["GRS", *SKILL_PARTS]
        values = [int(x) for x in lines[1].split("\t")]
        skill = case_skill(config, v)
        assert values == [skill.grs, *skill.parts]
    plain = generate_synthetic(tmp_path / "p", **TINY)
    assert not (plain / SKILL_DIR).exists()
    same = [
        (plain / "phase_annotations" / n.name).read_text() == n.read_text()
        for n in sorted((folder / "phase_annotations").iterdir())
    ]
    assert all(same) and len(same) == 4


def test_the_dataset_reads_each_cases_scores(tmp_path):
    data = get_dataset("synthetic-skill", root=tmp_path / "k", **TINY)
    config = SyntheticConfig(4, 32, 0, 25, 2.0, 4.0, skilled=True)
    for v, record in enumerate(data.videos()):
        skill = case_skill(config, v)
        assert record.skill["grs"] == skill.grs
        assert record.skill["suture_needle_handling"] == skill.parts[1]
        assert list(record.skill) == ["grs", *(skill_key(p) for p in SKILL_PARTS)]
    (tmp_path / "k" / SKILL_DIR / f"video01{SKILL_SUFFIX}").write_text("GRS\n")
    with pytest.raises(DataError, match="video01-skill.txt: not a skill file"):
        get_dataset("synthetic-skill", root=tmp_path / "k", **TINY).videos()
