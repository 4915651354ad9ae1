"""One report from a checked `ReportRequest`: read the predict folders, put the truth beside them, draw the
figures, write the page and the figures' PNG (each to a temporary name, then renamed, with the umask's
permissions: `utils.io.atomic_path`), and say what was written."""

from __future__ import annotations

from typing import Any

from plstitch_eval.report.figures import draw_video, stack_pngs
from plstitch_eval.report.html import render_page
from plstitch_eval.report.labels import attach_truth
from plstitch_eval.report.read import read_case
from plstitch_eval.report.request import ReportRequest
from plstitch_eval.utils.io import atomic_path, write_text_atomic


def write_report(request: ReportRequest) -> dict[str, Any]:
    """Write the request's HTML report and PNG; returns what was written, per video its sections."""
    request.check()
    videos = read_case(request.folders)
    attach_truth(videos, request.labels, request.labels_fps, request.dataset, request.root)
    figures = {video.name: draw_video(video, request.dpi) for video in videos}
    title = "Case report: " + ", ".join(str(folder) for folder in request.folders)
    page = render_page(videos, figures, title)
    with atomic_path(request.png_path) as tmp:
        tmp.write_bytes(stack_pngs([png for video in videos for png in figures[video.name].values()]))
    write_text_atomic(request.html_path, page)
    return {
        "report": str(request.html_path),
        "png": str(request.png_path),
        "videos": [
            {"video": v.name, "labelled": v.labelled, "online": v.online, "figures": list(figures[v.name])}
            for v in videos
        ],
    }
