"""Issue 64 item 3: every output option of every registered command, walked through the same cases - `.`,
`""`, a path under a regular file, a folder holding a user's file (with and without `--overwrite`) - is one
line naming the flag, before any work: exit 1, no traceback, the user's files untouched, nothing written.

The commands and their output options come from the app itself (an option carries its kind:
`commands.options.checked_output`), so a command registered later is walked as soon as it is in `ARGS`,
and `test_every_command_with_an_output_is_walked` fails until it is. What each kind refuses:

- a file (`--json`, `table --out`): all four cases;
- a folder replaced whole, or one the command fills as its own (a run, a store, a quickstart, an export):
  all cases, `.` being the current folder holding the user's file;
- a folder the command adds its named files to (`predict --out`, the `analyze` figures): `""` and a path
  under a file (`.` and a folder of the user's are where such files go).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import typer.testing
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.utils.outputs import EITHER, FILE, FOLDER, OWNED_FOLDER, REPLACED_FOLDER
from tests.eval.commands.test_output_paths import _commands
from tests.eval.protocols.stores import write_store

runner = CliRunner()
CLI = typer.main.get_command(app)  # built once: the walk invokes it about 150 times
OUTPUT_FLAGS = {
    "--out",
    "--json",
    "--jsonl",
    "--save",
    "--export-best",
}  # an output option without a check fails

# the fewest arguments that bring each command with an output option to its checks (STORE: a feature store,
# PROBE: a folder holding a probe.json; other inputs need not exist: outputs are checked first)
ARGS: dict[str, list[str]] = {
    "quickstart": [],
    "models": [],
    "probes": [],
    "protocols": [],
    "tasks": [],
    "objectives": [],
    "extract": ["--dataset", "synthetic", "--model", "raw-pixels"],
    "export-mstcn": ["STORE"],
    "knn": ["--features", "STORE"],
    "linear": ["--features", "STORE"],
    "cv": ["--features", "STORE"],
    "temporal": ["--features", "STORE"],
    "score": ["--pred", "pred.json", "--gt", "gt.json"],
    "table": ["results.json"],
    "predict": ["--probe", "PROBE", "video.mp4"],
    "export-onnx": ["PROBE"],
    "report": ["pred"],
    "benchmark": ["--models", "raw-pixels", "--datasets", "synthetic"],
    "train": ["--dataset", "synthetic", "--preset", "tiny-cpu"],
    "write-lmdb": ["--dataset", "synthetic"],
    "reproduce": [],
    "export": ["run"],
    "push-to-hub": ["PROBE", "--repo-id", "org/name", "--dry-run"],
    "analyze awareness": [],
    "analyze progression": ["--model", "model"],
    "analyze order": ["--model", "model", "--features", "STORE"],
    "analyze tsne": ["--features", "STORE"],
    "analyze timeline": ["--features", "STORE", "--pred", "pred.json"],
    "analyze attention": ["--model", "model", "--frames", "frames"],
    "analyze retrieval": ["--features", "STORE", "--query", "query"],
    "analyze run": ["run"],
}
# refusals whose line names the folder but not the flag (written in plstitch_eval/probes/folder.py)
NAMES_THE_FOLDER = {("linear", "--save"), ("temporal", "--save")}
CASES = {
    FILE: (".", "", "plainfile/x", "userdir"),
    REPLACED_FOLDER: (".", "", "plainfile/x", "userdir", "userdir --overwrite"),
    OWNED_FOLDER: (".", "", "plainfile/x", "userdir", "userdir --overwrite"),
    FOLDER: ("", "plainfile/x"),
    EITHER: ("", "plainfile/x"),
}


def _outputs():
    """(command name, flag, kind, has --overwrite) of every output option of every registered command."""
    for name, command in _commands(CLI):
        overwrite = any("--overwrite" in param.opts for param in command.params)
        for param in command.params:
            kind = getattr(param.callback, "output_kind", None)
            if kind is not None:
                yield name, param.opts[0], kind, overwrite


def _walk():
    for name, flag, kind, overwrite in _outputs():
        for case in CASES[kind]:
            if case.endswith("--overwrite") and not overwrite:
                continue
            yield pytest.param(name, flag, case, id=f"{name} {flag} {case or '<empty>'}")


def test_every_output_option_carries_its_kind():
    unchecked = [
        f"{name} {param.opts[0]}"
        for name, command in _commands(CLI)
        for param in command.params
        if OUTPUT_FLAGS & set(getattr(param, "opts", ()))
        and getattr(param.callback, "output_kind", None) is None
    ]
    assert unchecked == []


def test_every_command_with_an_output_is_walked():
    walked = {name for name, *_ in _outputs()}
    assert walked - set(ARGS) == set(), "add the command's fewest arguments to ARGS"
    assert {"train", "export-mstcn", "knn", "cv", "predict", "reproduce", "quickstart"} <= walked


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("inputs")
    probe = root / "probe"
    probe.mkdir()
    (probe / "probe.json").write_text("{}")
    return {"STORE": str(write_store(root / "store").root), "PROBE": str(probe)}


@pytest.fixture(autouse=True)
def _cli_built_once(monkeypatch):
    """The walk invokes the app about 150 times: Typer's runner builds its command once, not each time."""
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: CLI)


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize(("command", "flag", "case"), list(_walk()))
def test_each_output_case_is_one_line_before_any_work(command, flag, case, inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plainfile").write_text("a file of the user's")
    (tmp_path / "userdir").mkdir()
    (tmp_path / "userdir" / "mine.txt").write_text("the user's own")
    before = _snapshot(tmp_path)
    value, *extra = case.split(" ") if case else [""]
    args = [*command.split(" "), *(inputs.get(a, a) for a in ARGS[command]), flag, value, *extra]

    result = runner.invoke(app, args)

    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    named = value if (command, flag) in NAMES_THE_FOLDER else flag
    assert named in lines[0], lines[0]
    assert result.stdout == ""
    assert _snapshot(tmp_path) == before  # the user's files untouched, nothing new beside them
