"""Commands show their configs' defaults: each option's default is its config field's default (held here
where the command module does not import a heavy config module at start-up: `analyze ...`, `quickstart`),
and an option left unset leaves the config's default in place."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest
import typer
from typer.testing import CliRunner

from plstitch_eval.analysis import tsne as tsne_module
from plstitch_eval.analysis.attention import AttentionConfig
from plstitch_eval.analysis.awareness import AwarenessConfig
from plstitch_eval.analysis.progression import ProgressionConfig
from plstitch_eval.analysis.retrieval import RetrievalConfig
from plstitch_eval.analysis.timeline import TimelineConfig
from plstitch_eval.analysis.tsne import TsneConfig
from plstitch_eval.cli import app
from plstitch_eval.quickstart import QuickstartConfig
from plstitch_train.reproduce.presets import ReproduceConfig

CONFIGS = {
    "awareness": AwarenessConfig,
    "progression": ProgressionConfig,
    "tsne": TsneConfig,
    "timeline": TimelineConfig,
    "attention": AttentionConfig,
    "retrieval": RetrievalConfig,
}
RENAMED = {"max_frames": "max_frames_per_video", "bins": "n_bins", "perplexity": "perplexities"}


def _defaults(config: type) -> dict[str, object]:
    """The fields of `config` that have a default, with it."""
    found = {f.name: f.default for f in fields(config) if f.default is not MISSING}
    found.update({f.name: f.default_factory() for f in fields(config) if f.default_factory is not MISSING})
    return found


@pytest.mark.parametrize("name", [*sorted(CONFIGS), "quickstart", "reproduce"])
def test_each_option_default_is_its_configs(name: str) -> None:
    commands = typer.main.get_command(app).commands
    command = commands[name] if name in commands else commands["analyze"].commands[name]
    config = {"quickstart": QuickstartConfig, "reproduce": ReproduceConfig}.get(name) or CONFIGS[name]
    defaults = _defaults(config)
    checked = 0
    for param in command.params:
        field = RENAMED.get(param.name, param.name)
        if field not in defaults or param.default is None:  # None: not given, the config's default applies
            continue
        assert param.default == defaults[field], (name, field)
        checked += 1
    assert checked >= (3 if name in ("quickstart", "reproduce") else 1), name


def test_unset_name_and_perplexity_leave_the_configs_defaults(monkeypatch, tmp_path) -> None:
    made = []

    def stop(config: TsneConfig):
        made.append(config)
        raise KeyboardInterrupt

    monkeypatch.setattr(tsne_module, "run_tsne", stop)
    CliRunner().invoke(app, ["analyze", "tsne", "--features", str(tmp_path), "--out", str(tmp_path)])
    (config,) = made
    assert config == TsneConfig(features=str(tmp_path), out=tmp_path)
    CliRunner().invoke(app, ["analyze", "tsne", "--features", "f", "--perplexity", "5", "--name", "t2"])
    assert (made[1].perplexities, made[1].name) == ([5.0], "t2")
