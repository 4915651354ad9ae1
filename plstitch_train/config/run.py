"""The `run` section of a TrainConfig: seed, where and in what precision it runs, workers, cadence."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_train.config.section import Section, require


@dataclass
class RunConfig(Section):
    """How a run executes; all but `seed` and `precision` may change on resume (`run_dir.RUNTIME_FIELDS`)."""

    NAME = "run"

    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    num_workers: int = 4
    checkpoint_every: int = 500
    log_every: int = 10
    compile: bool = False  # torch.compile the student and teacher modules (a GPU's fused kernels)
    collapse_every: int = 50  # check the iBOT teacher for collapse every N steps (0 = never)
    stop_on_collapse: bool = False  # end the run (checkpoint saved) once the collapse monitor warns

    def __post_init__(self) -> None:
        require(self.checkpoint_every >= 1, f"checkpoint_every must be >= 1 (got {self.checkpoint_every}).")
        require(self.log_every >= 1, f"log_every must be >= 1 (got {self.log_every}).")
        require(self.collapse_every >= 0, f"collapse_every must be >= 0 (got {self.collapse_every}).")
        require(self.num_workers >= 0, f"num_workers must be >= 0 (got {self.num_workers}).")
