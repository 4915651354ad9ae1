"""`--executor` and the Slurm settings without a Slurm: the `[slurm]` table of `--config` with the `--slurm-*`
flags over it (`SlurmSettings`), each bad value one line; how a Slurm state reads (queued, running, ended)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plstitch_eval.benchmark.config_file import read_config_file, read_slurm_table
from plstitch_eval.benchmark.session import slurm_launch
from plstitch_eval.cluster import (
    ENDED,
    QUEUED,
    RUNNING,
    UNKNOWN,
    SlurmSettings,
    executor_settings,
    job_phase,
    read_slurm_file,
    slurm_settings,
)
from plstitch_eval.errors import ConfigError

CONFIG = """
[protocols.knn]
k = 7

[slurm]
partition = "gpu"
time = 30
gpus = 1
sbatch = ["--exclusive", "#SBATCH --reservation=lab"]
"""


def test_flags_go_over_the_table_and_none_keeps_it() -> None:
    settings = slurm_settings({"partition": "gpu", "time": 30}, partition="debug", time=None, mem="16G")
    assert settings == SlurmSettings(partition="debug", time=30, mem="16G")
    assert slurm_settings().time == 60 and slurm_settings().gpus == 0  # the dataclass defaults


def test_extra_sbatch_lines_become_options() -> None:
    settings = slurm_settings(sbatch=["--exclusive", "#SBATCH --reservation=lab"])
    assert settings.sbatch_options() == {"exclusive": True, "reservation": "lab"}


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"partiton": "gpu"}, "[slurm] has partiton; it takes partition, account, time"),
        ({"time": 0}, "must be at least 1"),
        ({"gpus": -1}, "slurm gpus must be a whole number >= 0"),
        ({"mem": "lots"}, "slurm mem 'lots'"),
        ({"sbatch": ["exclusive"]}, "slurm sbatch line 'exclusive'"),
        ({"poll_seconds": 0}, "poll_seconds must be > 0"),
    ],
)
def test_a_bad_setting_is_one_line(table: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        slurm_settings(table)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_the_config_file_holds_protocols_and_slurm(tmp_path: Path) -> None:
    path = tmp_path / "bench.toml"
    path.write_text(CONFIG, encoding="utf-8")
    assert read_config_file(path) == {"knn": {"k": 7}}
    assert read_slurm_table(path)["partition"] == "gpu"
    launch = slurm_launch("slurm", path, wait=True, time=90, gpus=None, sbatch=None)
    assert launch == SlurmSettings(
        partition="gpu", time=90, gpus=1, sbatch=("--exclusive", "#SBATCH --reservation=lab"), wait=True
    )
    assert slurm_launch("local", path) is None  # local: today's run, the table ignored
    with pytest.raises(ConfigError, match="--executor 'pbs': choose local or slurm"):
        slurm_launch("pbs", path)


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("PENDING", QUEUED),
        ("REQUEUED", QUEUED),
        ("RUNNING", RUNNING),
        ("COMPLETING", RUNNING),
        ("COMPLETED", ENDED),
        ("CANCELLED by 0", ENDED),
        ("TIMEOUT", ENDED),
        ("", UNKNOWN),
    ],
)
def test_slurm_states_read_as_phases(state: str, phase: str) -> None:
    assert job_phase(state) == phase


def test_slurm_config_file_gives_the_table_under_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "bench.toml"
    path.write_text(CONFIG, encoding="utf-8")
    assert read_slurm_file(path) == read_slurm_table(path)  # the benchmark's --config file serves
    settings = executor_settings("slurm", path, wait=True, partition="cpu", time=None)
    assert settings == SlurmSettings(
        partition="cpu", time=30, gpus=1, sbatch=("--exclusive", "#SBATCH --reservation=lab"), wait=True
    )
    assert executor_settings("local", path, partition="cpu") is None  # here, as always: no file read


@pytest.mark.parametrize(
    ("text", "needle"),
    [("[protocols.knn]\nk = 7\n", "a [slurm] table"), ("[slurm\n", "not a readable TOML file")],
)
def test_a_slurm_config_file_without_a_table_is_one_line(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "slurm.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(needle)) as caught:
        executor_settings("slurm", path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
