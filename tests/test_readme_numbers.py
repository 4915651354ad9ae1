"""The numbers of README.md's temporal walkthrough, read from its text and checked against a fresh run.

The README states them for one kind of machine (torch version, CPU, torch's CPU capability) and a spread for
others: one-thread MS-TCN still follows the CPU's kernels (docs/temporal.md, determinism). On a matching
machine a fresh quickstart store and two fits must print the very numbers (to the README's decimals, same
epoch); elsewhere they must fall inside the stated spread.
"""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.quickstart import QuickstartConfig, run_quickstart

README = Path(__file__).resolve().parents[1] / "README.md"
NUM = r"(\d+(?:\.\d+)?)"
MACHINE = re.compile(r"torch ([\d.]+) on a 2-core (.+?) whose torch CPU capability is (\w+);")
NON_CAUSAL = re.compile(
    rf"chose epoch (\d+); accuracy {NUM}, macro F1 \(videos\) {NUM}, Edit {NUM}, "
    rf"F1@\{{10,25,50\}} {NUM} / {NUM} / {NUM}"
)
CAUSAL = re.compile(rf"--causal --save probe-online/` scored {NUM} accuracy, {NUM} Edit \(epoch (\d+)\)")
SPREAD = re.compile(
    rf"spanned accuracy {NUM} to {NUM} \(epochs (\d+) to (\d+)\) with Edit {NUM}, and causal accuracy "
    rf"{NUM} to {NUM} with Edit {NUM} to {NUM} \(epochs (\d+) to (\d+)\);"
)


def readme_text() -> str:
    """README.md with every run of whitespace made one space (its sentences wrap anywhere)."""
    return " ".join(README.read_text(encoding="utf-8").split())


def _match(pattern: re.Pattern[str], text: str) -> re.Match[str]:
    found = pattern.search(text)
    assert found is not None, f"README.md no longer says {pattern.pattern!r}; edit both together"
    return found


def readme_numbers(text: str) -> dict:
    """What the walkthrough states: the machine, each run's numbers (as printed) and the spread elsewhere."""
    torch_version, cpu, capability = _match(MACHINE, text).groups()
    epoch, acc, f1v, edit, f10, f25, f50 = _match(NON_CAUSAL, text).groups()
    c_acc, c_edit, c_epoch = _match(CAUSAL, text).groups()
    s = _match(SPREAD, text).groups()
    return {
        "machine": {"torch": torch_version, "cpu": cpu, "capability": capability},
        "runs": {
            "temporal": {
                "epoch": int(epoch),
                "accuracy": acc,
                "macro_f1_video": f1v,
                "edit": edit,
                "f1@10": f10,
                "f1@25": f25,
                "f1@50": f50,
            },
            "causal": {"epoch": int(c_epoch), "accuracy": c_acc, "edit": c_edit},
        },
        "spread": {
            "temporal": {
                "accuracy": (float(s[0]), float(s[1])),
                "epoch": (int(s[2]), int(s[3])),
                "edit": (float(s[4]), float(s[4])),
            },
            "causal": {
                "accuracy": (float(s[5]), float(s[6])),
                "edit": (float(s[7]), float(s[8])),
                "epoch": (int(s[9]), int(s[10])),
            },
        },
    }


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what `platform` knows)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def is_readme_machine(machine: dict) -> bool:
    """This machine is the kind the README measured on: torch version, CPU model and torch's CPU kernels."""
    return (
        torch.__version__.split("+")[0] == machine["torch"]
        and machine["cpu"] in cpu_model()
        and torch.backends.cpu.get_cpu_capability() == machine["capability"]
    )


def test_readme_states_each_run_inside_its_own_spread() -> None:
    numbers = readme_numbers(readme_text())
    for run, stated in numbers["runs"].items():
        for key, (low, high) in numbers["spread"][run].items():
            assert low <= float(stated[key]) <= high, (run, key, stated[key], (low, high))


def test_the_readme_patterns_reject_an_edited_sentence() -> None:
    text = readme_text().replace("chose epoch", "picked epoch", 1)
    with pytest.raises(AssertionError, match="no longer says"):
        readme_numbers(text)


def _fit(store: Path, out: Path, *args: str) -> dict:
    result = CliRunner().invoke(app, ["temporal", "--features", str(store), "--json", str(out), "-q", *args])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_fresh_quickstart_store_gives_the_readme_numbers(tmp_path: Path) -> None:
    """`plstitch quickstart` then `plstitch temporal` and `--causal` on its store, as the README runs them
    (several minutes on 2 cores: the ViT extraction and two 50-epoch fits)."""
    numbers = readme_numbers(readme_text())
    quick = run_quickstart(
        QuickstartConfig(out=tmp_path / "qs", reference=False, device="cpu", num_workers=1, progress=False)
    )
    runs = {
        "temporal": _fit(quick.features, tmp_path / "t.json"),
        "causal": _fit(quick.features, tmp_path / "c.json", "--causal"),
    }
    exact = is_readme_machine(numbers["machine"])
    for run, stated in numbers["runs"].items():
        got = runs[run]
        assert got["protocol"]["threads"] == 1
        measured = {key: f"{got['metrics'][key]:.1f}" for key in stated if key != "epoch"}
        measured["epoch"] = got["protocol"]["chosen_epoch"]
        if exact:
            assert measured == stated, (run, measured, stated)
            continue
        for key, (low, high) in numbers["spread"][run].items():
            assert low <= float(measured[key]) <= high, (run, key, measured[key], (low, high), cpu_model())
