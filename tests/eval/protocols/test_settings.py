"""Every protocol's settings through its config dataclass: `plstitch benchmark --config FILE` tables and
`--set NAME.FIELD=VALUE` reach the shipped protocols too, in the order file < --set < flags; bad input is
one line naming the source; `plstitch protocols` lists them; the registry loads the shipped ones on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import get_protocol, registered_protocols
from plstitch_eval.protocols.settings import (
    apply_table,
    describe_protocols,
    merge_tables,
    parse_set_items,
    section_configs,
)
from tests.eval.benchmark.conftest import SMALL_DATASET, cli_args, runner, table_json
from tests.eval.evaluate.conftest import make_store


def test_set_items_are_read_as_json_else_text_and_merged_over_a_file() -> None:
    tables = parse_set_items(["knn.k=10", "knn.weighting=uniform", "linear.lrs=[0.1, 0.3]"])
    assert tables == {"knn": {"k": 10, "weighting": "uniform"}, "linear": {"lrs": [0.1, 0.3]}}
    merged = merge_tables({"knn": {"k": 3, "temperature": 0.1}}, tables)
    assert merged["knn"] == {"k": 10, "temperature": 0.1, "weighting": "uniform"}
    bases = section_configs(merged)
    assert bases["knn"] == KnnConfig(k=10, temperature=0.1, weighting="uniform")
    assert bases["linear"] == LinearConfig(lrs=(0.1, 0.3))  # a list for a tuple field becomes a tuple
    assert bases["temporal"] == get_protocol("temporal").config_type()


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["knn.k"], "expected PROTOCOL.FIELD=VALUE"),
        (["k=3"], "expected PROTOCOL.FIELD=VALUE"),
        (["nope.k=3"], "no protocol 'nope' is registered; known: knn, majority"),
        (["knn.radius=3"], "unknown setting.*radius; KnnConfig takes: k, temperature"),
        (["knn.k=3", "knn.k=4"], "knn.k is given twice"),
        (["majority.k=3"], "protocol 'majority' takes no settings"),
    ],
)
def test_bad_set_items_are_one_line(items: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_set_items(items)


def test_linear_tools_shares_the_linear_section_and_may_not_disagree() -> None:
    assert section_configs({"linear-tools": {"epochs": 3}})["linear"].epochs == 3
    with pytest.raises(ConfigError, match=r"\[protocols.linear-tools\] epochs = 4 disagrees"):
        section_configs({"linear": {"epochs": 3}, "linear-tools": {"epochs": 4}})
    with pytest.raises(ConfigError, match="k must be|k"):  # the config's own check of a value
        apply_table(get_protocol("knn"), {"k": 0})


def _knn_cell(out: Path, datasets: Path, *extra: str) -> dict:
    args = cli_args(out, str(datasets), models="plstitch-tiny-synthetic", protocols="knn")
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    cell = table_json(out)["cells"][0]
    return json.loads(Path(cell["results"]).read_text(encoding="utf-8"))


def test_a_config_file_and_set_reach_a_shipped_protocol_below_its_flags(tmp_path: Path) -> None:
    """[protocols.knn] k = 3 gives the very cell `--k 3` gives; --set goes over the file, --k over both."""
    datasets = tmp_path / "small.toml"
    datasets.write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    config_file = tmp_path / "bench.toml"
    config_file.write_text('[protocols.knn]\nk = 3\nweighting = "uniform"\n')
    by_file = _knn_cell(tmp_path / "file", datasets, "--config", str(config_file))
    by_flags = _knn_cell(tmp_path / "flags", datasets, "--k", "3", "--weighting", "uniform")
    assert by_file["protocol"]["ks"] == [3] and by_file["protocol"]["weighting"] == "uniform"
    assert by_file["benchmark"]["settings"]["knn"] == by_flags["benchmark"]["settings"]["knn"]
    assert by_file["predictions"] == by_flags["predictions"] and by_file["metrics"] == by_flags["metrics"]
    by_set = _knn_cell(tmp_path / "set", datasets, "--config", str(config_file), "--set", "knn.k=5")
    assert by_set["benchmark"]["settings"]["knn"]["k"] == 5
    assert by_set["benchmark"]["settings"]["knn"]["weighting"] == "uniform"  # the file's, not overridden
    flags = ("--config", str(config_file), "--set", "knn.k=5", "--k", "7")
    by_flag = _knn_cell(tmp_path / "flag", datasets, *flags)
    assert by_flag["benchmark"]["settings"]["knn"]["k"] == 7


def test_cv_set_equals_the_flag(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", n_videos=8)
    outs = []
    for i, extra in enumerate((["--set", "k=3"], ["--k", "3"], ["--set", "knn.k=3"])):
        out = tmp_path / f"cv{i}.json"
        result = runner.invoke(
            app, ["cv", "--features", str(store.root), "--folds", "4", "--json", str(out), *extra]
        )
        assert result.exit_code == 0, result.output
        outs.append(json.loads(out.read_text(encoding="utf-8")))
    assert outs[0]["protocol"]["k"] == 3
    for other in outs[1:]:
        assert other["predictions"] == outs[0]["predictions"] and other["protocol"] == outs[0]["protocol"]


def test_bad_settings_are_one_line_at_the_cli(tmp_path: Path) -> None:
    config_file = tmp_path / "bench.toml"
    config_file.write_text("[protocols.knn]\nradius = 3\n")
    args = cli_args(tmp_path / "out", "synthetic", models="plstitch-tiny-synthetic", protocols="knn")
    for extra, named in (
        (["--config", str(config_file)], f"{config_file} [protocols.knn]: unknown setting(s) radius"),
        (["--set", "knn.radius=3"], "--set knn: unknown setting(s) radius"),
        (["--set", "knn.k=0"], "k"),
    ):
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 1, result.output
        assert named in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_protocols_lists_every_registered_protocol_and_its_defaults() -> None:
    rows = describe_protocols()
    assert [r["name"] for r in rows] == [p.name for p in registered_protocols()]
    knn = next(r for r in rows if r["name"] == "knn")
    assert {"name": "k", "default": KnnConfig().k, "runtime": False} in knn["settings"]
    assert {"name": "device", "default": KnnConfig().device, "runtime": True} in knn["settings"]
    tools = next(r for r in rows if r["name"] == "linear-tools")
    assert tools["shares_settings_of"] == "linear" and tools["settings"] == []
    result = runner.invoke(app, ["protocols"])
    assert result.exit_code == 0, result.output
    assert f"knn.k = {KnnConfig().k}" in result.stdout and "linear-tools" in result.stdout


def test_the_shipped_protocols_load_on_first_use_only() -> None:
    """Importing one protocol module (`plstitch score`'s prediction files) loads no other protocol and no
    scikit-learn; the shipped ones are listed in their order whichever registers first, ahead of a plugin
    registered before any lookup."""
    code = (
        "import sys\n"
        "import plstitch_eval.protocols.prediction_files\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('plstitch_eval.protocols.'))\n"
        "print(loaded, 'sklearn' in sys.modules)\n"
        "import plstitch_eval.protocols.linear  # registers itself before the others\n"
        "from plstitch_eval.protocols import Protocol, register_protocol, protocol_names\n"
        "register_protocol(Protocol('plugin', 'plugin', 'plugin'))\n"
        "print(list(protocol_names()))\n"
        "from plstitch_eval.results_json import build_results\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = done.stdout.strip().splitlines()
    assert "plstitch_eval.protocols.knn" not in first and "plstitch_eval.protocols.linear" not in first
    assert first.endswith("False")
    assert second == str(["knn", "majority", "linear", "temporal", "cv", "linear-tools", "plugin"])
