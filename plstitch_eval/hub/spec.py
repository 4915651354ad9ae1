"""The encoder-spec grammar, in one place: what a string given to `load_encoder` (or `--models`) names.

    registry name            an entry of `hub/registry.py` (`plstitch models`)
    hf-hub:ORG/NAME[@REV]    a timm-format Hub repo (config.json + model.safetensors)
    hf-hub:ORG/NAME[@REV]/FILE   one raw checkpoint file of a Hub repo
    random-init:SPEC         SPEC's (timm-format) architecture with fresh weights (`hub/random_init.py`)
    anything else            a folder (timm format, training run) or checkpoint file path

`parse_spec` reads a spec without network or disk (as timm's `parse_model_name` does) and raises the one-line
`ConfigError`s of a malformed Hub or random-init spec; `check_spec` also refuses a bare name that is neither
a registry model nor shaped like a path, naming the closest registry names.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.safe_load import CHECKPOINT_SUFFIXES

HF_HUB_PREFIX = "hf-hub:"
RANDOM_INIT_PREFIX = "random-init:"
SPEC_KINDS = ("registry", "hf-hub", "random-init", "path")
HF_HUB_FORM = f"{HF_HUB_PREFIX}ORG/NAME"  # as messages name the forms
HF_HUB_FILE_FORM = f"{HF_HUB_FORM}[/FILE]"
RANDOM_INIT_FORM = f"{RANDOM_INIT_PREFIX}SPEC"


@dataclass(frozen=True)
class EncoderSpec:
    """One parsed spec: its `kind` (`SPEC_KINDS`), the `text` as given, the parts of an hf-hub spec, and the
    spec inside a random-init one (`source`)."""

    kind: str
    text: str
    repo_id: str | None = None  # hf-hub: ORG/NAME
    filename: str | None = None  # hf-hub: a raw checkpoint file of the repo; None: a timm-format repo
    revision: str | None = None  # hf-hub: the `@REV` of the spec
    source: EncoderSpec | None = None  # random-init: the timm-format spec whose architecture is taken

    def __str__(self) -> str:
        return self.text

    @property
    def entry(self) -> ModelEntry:
        """The registry entry of a "registry" spec."""
        if self.kind != "registry":
            raise ConfigError(f"{self.text!r} is a {self.kind} spec, not a registry name.")
        return MODELS[self.text]

    @property
    def path(self) -> Path:
        """The filesystem path a "path" spec names (`~` expanded); it need not exist."""
        return Path(self.text).expanduser()

    @property
    def looks_like_path(self) -> bool:
        """True when the text reads as a path (a separator, `~` or `.` first, a checkpoint suffix) or one
        exists: what separates a folder or checkpoint from a mistyped registry name."""
        text, path = self.text, self.path
        if "/" in text or os.sep in text or text.startswith(("~", ".")) or path.exists():
            return True
        return path.suffix.lower() in CHECKPOINT_SUFFIXES


def parse_spec(spec: str | os.PathLike) -> EncoderSpec:
    """`spec` -> `EncoderSpec`, kinds tried in `load_encoder`'s order: random-init, registry, hf-hub, path.

    Nothing is fetched or opened; a malformed hf-hub spec or a random-init with no (or another random-init)
    spec inside is a one-line `ConfigError`. Whatever else is not a registry name is a "path".
    """
    text = str(spec)
    if text.startswith(RANDOM_INIT_PREFIX):
        return EncoderSpec(
            "random-init", text, source=parse_random_init_source(text[len(RANDOM_INIT_PREFIX) :])
        )
    if text in MODELS:
        return EncoderSpec("registry", text)
    if text.startswith(HF_HUB_PREFIX):
        repo_id, filename, revision = parse_hf_spec(text)
        return EncoderSpec("hf-hub", text, repo_id=repo_id, filename=filename, revision=revision)
    return EncoderSpec("path", text)


def parse_random_init_source(source: str) -> EncoderSpec:
    """The spec inside `random-init:SPEC`; empty or itself a random-init spec is a `ConfigError`."""
    if not source or source.startswith(RANDOM_INIT_PREFIX):
        raise ConfigError(f"random-init needs a model spec after {RANDOM_INIT_PREFIX!r}, got {source!r}.")
    return parse_spec(source)


def parse_hf_spec(spec: str) -> tuple[str, str | None, str | None]:
    """`hf-hub:ORG/NAME[@REV]` or `hf-hub:ORG/NAME[@REV]/FILE` -> (repo_id, filename|None, revision|None)."""
    rest = spec.removeprefix(HF_HUB_PREFIX)
    parts = rest.split("/", 2)
    if len(parts) < 2 or not all(parts[:2]):
        raise ConfigError(f"Bad Hub spec {spec!r}; use {HF_HUB_FORM} or {HF_HUB_FORM}/FILE.")
    name, _, revision = parts[1].partition("@")
    filename = parts[2] if len(parts) == 3 and parts[2] else None
    return f"{parts[0]}/{name}", filename, revision or None


def hub_spec(repo_id: str, filename: str | None = None) -> str:
    """The hf-hub spec of a Hub repo (timm format) or of one file in it."""
    return f"{HF_HUB_PREFIX}{repo_id}" + (f"/{filename}" if filename else "")


def random_init_spec(spec: str | os.PathLike) -> str:
    """The encoder spec of `spec`'s random-init reference: `random-init:SPEC`."""
    return f"{RANDOM_INIT_PREFIX}{spec}"


def random_init_source(spec: str | os.PathLike) -> str | None:
    """SPEC of a `random-init:SPEC` spec, else None (never raises: `parse_spec` checks SPEC)."""
    spec = str(spec)
    return spec[len(RANDOM_INIT_PREFIX) :] if spec.startswith(RANDOM_INIT_PREFIX) else None


def check_spec(spec: str | os.PathLike, *, option: str | None = None, collections: Sequence[str] = ()) -> str:
    """`spec` stripped when `load_encoder` could take it; an empty spec, a malformed hf-hub or random-init
    spec, or a bare name that is no registry model and does not read as a path is a one-line `ConfigError`
    (with the closest registry names). Paths are not opened: a missing checkpoint fails when it is loaded.

    `option` (e.g. "--models") and `collections` (other names that option takes, offered as close matches
    too) only shape the messages, for a command-line option that takes a list of specs.
    """
    text = str(spec).strip()
    if not text:
        if option:
            raise ConfigError(f"{option} has an empty item (two commas in a row?); write A,B,... .")
        raise ConfigError(f"Empty model spec; pass {_forms(collections)}.")
    parsed = parse_spec(text)
    if parsed.kind == "random-init" and parsed.source is not None:
        check_spec(parsed.source.text, option=option, collections=collections)
    elif parsed.kind == "path" and not parsed.looks_like_path:
        close = difflib.get_close_matches(text, [*MODELS, *collections], n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        where = f" in {option}" if option else ""
        raise ConfigError(f"Unknown model {text!r}{where}.{hint} Pass {_forms(collections)}.")
    return text


def _forms(collections: Sequence[str]) -> str:
    collection = f"a collection ({', '.join(collections)}), " if collections else ""
    return (
        f"a registry name (`plstitch models`), {collection}{HF_HUB_FORM}, {RANDOM_INIT_FORM}, or a folder or "
        "checkpoint path"
    )


__all__ = [
    "HF_HUB_FILE_FORM",
    "HF_HUB_FORM",
    "HF_HUB_PREFIX",
    "RANDOM_INIT_FORM",
    "RANDOM_INIT_PREFIX",
    "SPEC_KINDS",
    "EncoderSpec",
    "check_spec",
    "hub_spec",
    "parse_hf_spec",
    "parse_random_init_source",
    "parse_spec",
    "random_init_source",
    "random_init_spec",
]
