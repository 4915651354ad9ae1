"""What a `plstitch report` command line asks for (`ReportRequest`): the predict folders, where the page
goes, the truth to compare against; checked before anything is read, so a bad combination is one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.outputs import FILE, check_output_path

HTML_SUFFIXES = (".html", ".htm")
DEFAULT_NAME = "report.html"  # in the (first) predict folder when --out is not given


@dataclass
class ReportRequest:
    """The report's inputs and settings: predict output folders (merged by video name), the HTML file
    (`out`; its figures' PNG beside it, same name), `--labels` files (one per video) and their rate, or a
    dataset's annotations; `overwrite` replaces an earlier report; `dpi` of the figures."""

    folders: list[Path]
    out: Path | None = None
    labels: list[Path] = field(default_factory=list)
    labels_fps: float | None = None
    dataset: str | None = None
    root: Path | None = None
    overwrite: bool = False
    dpi: int = 100

    @property
    def html_path(self) -> Path:
        return Path(self.out).expanduser() if self.out is not None else self.folders[0] / DEFAULT_NAME

    @property
    def png_path(self) -> Path:
        return self.html_path.with_suffix(".png")

    def check(self) -> None:
        """An .html name whose page and PNG are new (or `overwrite`), one source of truth, a folder given."""
        if not self.folders:
            raise ConfigError("Give the predict output folder(s): plstitch report DIR [DIR ...].")
        html = self.html_path
        check_output_path(html, "--out", FILE)
        if html.suffix.lower() not in HTML_SUFFIXES:
            raise ConfigError(
                f"--out {html}: give an .html file name (e.g. {html.with_suffix('.html')}); the figures' PNG "
                "is written beside it."
            )
        existing = [p for p in (html, self.png_path) if p.exists()]
        if existing and not self.overwrite:
            raise ConfigError(
                f"{existing[0]} exists; pass --overwrite to replace the report, or choose another --out."
            )
        if self.png_path.with_suffix(".csv").exists():
            raise ConfigError(
                f"--out {html}: its PNG {self.png_path} would replace predict's figure of "
                f"{self.png_path.stem}; choose another name (e.g. {html.with_name(DEFAULT_NAME)})."
            )
        if self.png_path.is_dir():
            raise ConfigError(f"{self.png_path} is a folder; choose another --out (the PNG goes beside it).")
        if self.labels and self.dataset is not None:
            raise ConfigError("Give --labels or --dataset, not both: one source of truth.")
        if self.dataset is None and self.root is not None:
            raise ConfigError("--root goes with --dataset NAME (the dataset's folder).")
        if self.labels_fps is not None and not self.labels:
            raise ConfigError("--labels-fps goes with --labels (the rate of their rows).")
