"""The `run` section of a TrainConfig: seed, where and in what precision it runs, workers, cadence."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_train.config.section import Section, require

EVAL_SPLITS = (None, "val", "test")  # k-NN query splits while training (None: val, else test)


@dataclass
class RunConfig(Section):
    """How a run executes; all but `seed` and `precision` may change on resume (`run.plan.RUNTIME_FIELDS`)."""

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
    eval_every: int = (
        0  # the teacher's k-NN accuracy on eval_dataset every N steps and at the last (0 = never)
    )
    eval_dataset: str | None = None  # a dataset adapter of `plstitch datasets` (synthetic needs no root)
    eval_root: str | None = None  # its folder
    eval_split: str | None = None  # the query split (the bank is train); None: val if it has one, else test
    eval_fps: float = 1.0  # frames per second evaluated, as `plstitch extract --fps` (the reproduce presets')

    def __post_init__(self) -> None:
        require(self.checkpoint_every >= 1, f"checkpoint_every must be >= 1 (got {self.checkpoint_every}).")
        require(self.log_every >= 1, f"log_every must be >= 1 (got {self.log_every}).")
        require(self.collapse_every >= 0, f"collapse_every must be >= 0 (got {self.collapse_every}).")
        require(self.eval_every >= 0, f"eval_every must be >= 0 (got {self.eval_every}).")
        require(
            self.eval_every == 0 or bool(self.eval_dataset),
            f"eval_every={self.eval_every} needs eval_dataset (--eval-dataset NAME, e.g. synthetic).",
        )
        require(
            self.eval_split in EVAL_SPLITS,
            f"eval_split must be val, test or unset (got {self.eval_split!r}).",
        )
        require(self.eval_fps > 0, f"eval_fps must be > 0 (got {self.eval_fps}).")
        require(self.num_workers >= 0, f"num_workers must be >= 0 (got {self.num_workers}).")
