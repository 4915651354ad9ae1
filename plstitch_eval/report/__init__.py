"""`plstitch report`: a `plstitch predict` output folder (offline or live) as one self-contained HTML page
and a PNG of its figures - the case report of issue 66.

The modules, in the order a report uses them:
- `request`: `ReportRequest`, what the command line asks for, checked before anything is read;
- `case`: `CaseVideo`, what the report knows of a video (its tracks, its live record), and the CSV columns;
- `read`: the folder's `<video>.csv` files as tracks (phases, a regression probe's minutes, tools);
- `live`: the folder's summary JSON and `--jsonl` lines (source, how it ended, latency, drops, gaps);
- `labels`: the truth, read as predict reads it (`predict.sources`: `--labels`, `--dataset`);
- `phases`: time per phase, transitions, accuracy;
- `figures`: the ribbon and curves as PNG (matplotlib Agg), stacked into one PNG;
- `html`: the page (inline styles, base64 images, no script);
- `run`: `write_report`, one report from request to files.
"""

from plstitch_eval.report.request import ReportRequest
from plstitch_eval.report.run import write_report

__all__ = ["ReportRequest", "write_report"]
