"""`python -m plstitch_eval` is `plstitch` (the torchrun entry); `python -m plstitch_train` points to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.eval.test_cli import COMMANDS, _listed_commands

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, COLUMNS="120", PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_python_m_plstitch_eval_help_lists_every_command() -> None:
    done = _run("-m", "plstitch_eval", "--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m plstitch_eval [OPTIONS] COMMAND" in done.stdout
    assert set(COMMANDS) <= _listed_commands(done.stdout)


def test_python_m_plstitch_eval_extract_bad_argument_is_one_line(tmp_path: Path) -> None:
    done = _run("-m", "plstitch_eval", "extract", "--dataset", "synthetic", "--model", "nosuchmodel",
                "--out", str(tmp_path / "feats"))  # fmt: skip
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "'nosuchmodel'" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_python_m_plstitch_train_names_the_new_entry() -> None:
    done = _run("-m", "plstitch_train", "--config", "c.json", "--out", "runs/x")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "`python -m plstitch_train` was replaced by `python -m plstitch_eval train` "
        "(torchrun: `torchrun ... -m plstitch_eval train ...`)"
    ]
    assert done.stdout == ""
