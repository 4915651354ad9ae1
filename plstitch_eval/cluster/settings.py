"""Where a command's work runs (`--executor local|slurm`) and, on Slurm, what each job asks for: the `[slurm]`
table of a `--config` file with the `--slurm-*` flags over it, as one `SlurmSettings` (docs/cluster.md)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plstitch_eval.errors import ConfigError

__all__ = [
    "EXECUTORS",
    "LOCAL",
    "SLURM",
    "SlurmSettings",
    "check_executor",
    "executor_settings",
    "read_slurm_file",
    "slurm_settings",
]

LOCAL, SLURM = "local", "slurm"
EXECUTORS = (LOCAL, SLURM)
MEMORY = re.compile(r"^\d+(\.\d+)?[KMGT]?B?$", re.IGNORECASE)  # what sbatch --mem takes: 4000, 16G, 500MB
SBATCH_LINE = re.compile(r"^(#SBATCH\s+)?--(?P<key>[a-z][a-z0-9-]*)(=(?P<value>.+))?$")


@dataclass(frozen=True)
class SlurmSettings:
    """What each Slurm job of a run asks for, and whether the command waits for its jobs.

    Why one dataclass: the flags, the `[slurm]` table and the executor all read the same fields; `sbatch`
    holds any other sbatch option, one `--key=value` (or `--flag`) a line, as `#SBATCH` would write it.
    """

    partition: str | None = None
    account: str | None = None
    time: int = 60  # minutes a job may run (sbatch --time); on timeout the job is requeued (docs/cluster.md)
    gpus: int = 0  # GPUs per job (--gpus-per-node)
    cpus: int | None = None  # CPUs per job (--cpus-per-task); None: the partition's default
    mem: str | None = None  # memory per job as sbatch takes it: 16G, 4000M
    qos: str | None = None
    constraint: str | None = None
    sbatch: tuple[str, ...] = ()  # other sbatch options, e.g. --exclusive, --reservation=lab
    wait: bool = False  # the command waits for its jobs, then writes what follows them
    poll_seconds: float = 30.0  # how often a waiting command asks Slurm (squeue) how its jobs stand

    def __post_init__(self) -> None:
        if isinstance(self.sbatch, str):
            object.__setattr__(self, "sbatch", (self.sbatch,))
        object.__setattr__(self, "sbatch", tuple(str(line).strip() for line in self.sbatch))
        for name in ("time", "gpus", "cpus"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"slurm {name} must be a whole number >= 0, got {value!r}.")
        if self.time < 1 or (self.cpus is not None and self.cpus < 1):
            raise ConfigError("slurm time (minutes) and cpus must be at least 1.")
        if self.mem is not None and not MEMORY.match(str(self.mem)):
            raise ConfigError(f"slurm mem {self.mem!r}: write it as sbatch --mem takes it, e.g. 16G, 4000M.")
        if not self.poll_seconds > 0:
            raise ConfigError(f"slurm poll_seconds must be > 0, got {self.poll_seconds!r}.")
        self.sbatch_options()  # a malformed line is refused here, before anything is submitted

    def sbatch_options(self) -> dict[str, Any]:
        """The `sbatch` lines as options: `--exclusive` -> {"exclusive": True}, `--reservation=x` -> "x"."""
        options: dict[str, Any] = {}
        for line in self.sbatch:
            match = SBATCH_LINE.match(line)
            if match is None:
                raise ConfigError(
                    f"slurm sbatch line {line!r}: write one sbatch option as --key=value or --flag "
                    "(e.g. --exclusive, --reservation=lab)."
                )
            options[match["key"]] = True if match["value"] is None else match["value"].strip()
        return options


def slurm_settings(table: Mapping[str, Any] | None = None, **flags: Any) -> SlurmSettings:
    """The `[slurm]` table of a config file with the flags given over it (a flag left None keeps the
    table's value, else the dataclass default); an unknown key of the table is one line naming the keys."""
    known = [f.name for f in dataclasses.fields(SlurmSettings)]
    values = dict(table or {})
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"[slurm] has {', '.join(unknown)}; it takes {', '.join(known)} (docs/cluster.md).")
    for name, value in flags.items():
        if name not in known:
            raise TypeError(f"slurm_settings() got an unknown flag {name!r}")
        if value is not None and value != ():
            values[name] = tuple(value) if name == "sbatch" else value
    return SlurmSettings(**values)


def check_executor(executor: str) -> str:
    """`local` or `slurm`; anything else is one line naming both."""
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor {executor!r}: choose {' or '.join(EXECUTORS)}.")
    return executor


def executor_settings(
    executor: str,
    table: Mapping[str, Any] | str | Path | None = None,
    *,
    wait: bool = False,
    **flags: Any,
) -> SlurmSettings | None:
    """The Slurm settings of `--executor slurm` (a `[slurm]` table, or the file holding it, the `--slurm-*`
    flags and `--wait` over it); None for `--executor local`, which runs here as always."""
    if check_executor(executor) != SLURM:
        return None
    if isinstance(table, (str, Path)):
        table = read_slurm_file(table)
    return slurm_settings(table, **flags, wait=wait or None)


def read_slurm_file(path: str | Path) -> dict[str, Any]:
    """The `[slurm]` table of a TOML file (`--slurm-config`; a benchmark `--config` file does too: its other
    tables are not read here); a file that cannot be read or has no such table is one line."""
    path = Path(path).expanduser()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ConfigError(
                f"--slurm-config {path}: reading TOML needs Python 3.11+ or `pip install tomli`."
            ) from None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"--slurm-config {path}: not a readable TOML file ({exc}).") from None
    table = data.get("slurm")
    if not isinstance(table, dict):
        raise ConfigError(
            f"--slurm-config {path}: write the Slurm settings as a [slurm] table (docs/cluster.md)"
        )
    return dict(table)
