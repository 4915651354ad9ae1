"""The case report as one self-contained HTML page: styles inline, figures embedded as base64 PNG, no
script, no external asset (it opens offline, from a USB stick, in any browser).

A section per video: its phase ribbon, time per phase and transitions (tables), the remaining-time curve,
the minutes to each next phase, tools over time, and for a live case latency p50/p99 and dropped frames.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape

from plstitch_eval.report.case import CVS, NEXT, REMAINING, TOOLS, TRIPLETS, CaseVideo
from plstitch_eval.report.figures import LATENCY, PHASES
from plstitch_eval.report.phases import accuracy, phase_times, transitions

NO_LABELS = (
    "No labels were given for this case (--labels or --dataset), so it shows the predictions alone, "
    "without the true phases or an accuracy."
)
CURVE_HEADINGS = {
    REMAINING: "Remaining time",
    NEXT: "Minutes until each anticipated class",
    TOOLS: "Tools over time",
    TRIPLETS: "Action triplets over time",
    CVS: "Critical view of safety criteria over time",
}
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 2px solid #0072B2; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; } td, th { padding: .2em .8em; text-align: left; }
th { border-bottom: 1px solid #888; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; display: block; } .meta, .note { color: #444; }
.nolabels { background: #fff4d6; padding: .4em .8em; border-left: 4px solid #E69F00; }
"""


def render_page(videos: Sequence[CaseVideo], figures: Mapping[str, Mapping[str, bytes]], title: str) -> str:
    """The whole page: a heading, a list of the videos, a section per video (`figures[video][section]`)."""
    links = "".join(f'<li><a href="#{_anchor(v.name)}">{escape(v.name)}</a></li>' for v in videos)
    body = "".join(video_section(v, figures.get(v.name, {})) for v in videos)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1><ul>{links}</ul>{body}</body></html>\n"
    )


def _anchor(name: str) -> str:
    return "video-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)


def video_section(video: CaseVideo, figures: Mapping[str, bytes]) -> str:
    """One video's section, its parts in reading order."""
    parts = [f'<h2>{escape(video.name)}</h2><p class="meta">{escape(_meta(video))}</p>']
    if not video.labelled:
        parts.append(f'<p class="nolabels">{escape(NO_LABELS)}</p>')
    if video.phases is not None:
        parts.append(phases_part(video, figures.get(PHASES)))
    for kind, heading in CURVE_HEADINGS.items():
        if video.curve(kind) is not None:
            parts.append(_part(kind, heading, _image(figures.get(kind), f"{video.name}: {heading}")))
    if video.online:
        parts.append(live_part(video, figures.get(LATENCY)))
    return f'<section class="video" id="{_anchor(video.name)}">{"".join(parts)}</section>'


def _meta(video: CaseVideo) -> str:
    track = video.phases or (video.curves[0] if video.curves else None)
    frames = 0 if track is None else len(track.frame_times)
    told = [f"{frames} sampled frames"]
    if video.source:
        told.insert(0, f"source {video.source}")
    if video.ended:
        told.append(f"ended: {video.ended}")
    return "; ".join(told) + "."


def _part(kind: str, heading: str, inner: str) -> str:
    return f'<section class="{kind}"><h3>{escape(heading)}</h3>{inner}</section>'


def _image(png: bytes | None, alt: str) -> str:
    if png is None:
        return '<p class="note">No frames.</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def phases_part(video: CaseVideo, png: bytes | None) -> str:
    """The ribbon, the accuracy, the time per phase and the transitions of a phase track."""
    track = video.phases
    assert track is not None
    score = accuracy(track)
    told = "" if score is None else f'<p class="accuracy">Accuracy against the truth: {score:.1f} %.</p>'
    ribbon = _part(PHASES, "Phases", _image(png, f"{video.name}: phase ribbon") + told)
    labelled = track.truth is not None
    head = ["phase", "predicted", "share"] + (["truth"] if labelled else [])
    rows = [
        [_text(t.phase), _duration(t.seconds), _num(f"{t.share * 100:.1f} %")]
        + ([_duration(t.truth_seconds or 0.0)] if labelled else [])
        for t in phase_times(track)
    ]
    moves = transitions(track.predicted, track.frame_times, track.class_names)
    changes = [[_text(m.from_phase), _text(m.to_phase), _duration(m.at_s)] for m in moves]
    durations = _part("durations", "Time per phase", _table(head, rows))
    shown = _table(["from", "to", "at"], changes) if changes else '<p class="note">No transition.</p>'
    return ribbon + durations + _part("transitions", "Transitions (predicted)", shown)


def live_part(video: CaseVideo, png: bytes | None) -> str:
    """Latency p50/p99 and dropped frames of a live case, from its `--jsonl` lines and summary."""
    live = video.live
    if live is None:
        note = "No per-frame lines in the folder (predict --jsonl DIR/frames.jsonl), so no latency is known."
        return _part("live", "Live", f'<p class="note">{escape(note)}</p>')
    p50, p99 = live.latency_ms(0.5), live.latency_ms(0.99)
    rows = [
        [_text("latency p50"), _num("-" if p50 is None else f"{p50:.1f} ms")],
        [_text("latency p99"), _num("-" if p99 is None else f"{p99:.1f} ms")],
        [_text("dropped frames"), _num(str(live.dropped))],
    ]
    if live.due is not None:
        rows.append([_text("frames due"), _num(str(live.due))])
    if live.kept_up is not None:
        rows.append([_text("kept up"), _num(f"{live.kept_up * 100:.1f} %")])
    rows.append([_text("gaps"), _num(str(len(live.gaps)))])
    figure = _image(png, f"{video.name}: latency") if png is not None else ""
    return _part("live", "Live", _table(["measure", "value"], rows) + figure)


def _table(head: list[str], rows: list[list[str]]) -> str:
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join(f"<tr>{''.join(cells)}</tr>" for cells in rows)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _text(value: str) -> str:
    return f"<td>{escape(value)}</td>"


def _num(value: str) -> str:
    return f'<td class="num">{escape(value)}</td>'


def _duration(seconds: float) -> str:
    """A time as h:mm:ss.s (m:ss.s under an hour), its seconds in `data-s` for machines."""
    minutes, rest = divmod(round(max(seconds, 0.0), 1), 60.0)
    hours, minutes = divmod(int(minutes), 60)
    shown = f"{hours}:{minutes:02d}:{rest:04.1f}" if hours else f"{minutes}:{rest:04.1f}"
    return f'<td class="num" data-s="{seconds:.6f}">{shown}</td>'
