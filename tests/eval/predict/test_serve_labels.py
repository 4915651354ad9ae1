"""The live page with a multi-label probe beside the phase probe: its present labels as chips ("Tools:
Grasper, Hook") in a real headless Chromium, its probabilities kept out of the minutes row, and a
regression probe's minutes shown as before."""

from __future__ import annotations

import socket

import pytest

from plstitch_eval.predict.serve import CaseState, LivePage, serve_settings
from plstitch_eval.utils.sender import free_port
from tests.browser import Browser, need_chromium

pytest.importorskip("starlette", reason="the serve extra (pip install 'plstitch[serve]') is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (pip install 'plstitch[serve]') is not installed")

VALUES = ["tools.tool_Grasper", "tools.tool_Hook", "tools.tool_Clipper", "tools.present", "rsd.remaining_min"]


def _row(i: int, present: list[str]) -> dict:
    p = {name: 0.9 if name in present else 0.1 for name in ("Grasper", "Hook", "Clipper")}
    return {
        "video": "v", "time_s": i * 0.5, "phases.predicted": "A", "phases.A": 0.7, "phases.B": 0.3,
        **{f"tools.tool_{name}": value for name, value in p.items()}, "tools.present": ";".join(present),
        "rsd.remaining_min": 12.25, "latency_s": 0.02, "dropped": 0,
    }  # fmt: skip


def test_case_state_passes_a_multilabel_probes_fields_to_the_page() -> None:
    state = CaseState(["A", "B"], VALUES, "src", "phases")
    event = state.add(_row(0, ["Grasper", "Hook"]))
    assert event["values"]["tools.present"] == "Grasper;Hook" and event["predicted"] == "A"
    assert event["values"]["tools.tool_Hook"] == 0.9 and event["values"]["rsd.remaining_min"] == 12.25


def test_chromium_shows_the_present_tools_as_chips_and_the_minutes_as_before(tmp_path) -> None:
    chromium = need_chromium()
    page = LivePage(
        serve_settings(f"127.0.0.1:{free_port(socket.SOCK_STREAM)}"),
        CaseState(["A", "B"], VALUES, "s", "phases"),
    )
    page.start()
    try:
        with Browser(chromium) as browser:
            browser.open(f"http://127.0.0.1:{page.port}/")
            page.publish(_row(0, ["Grasper", "Hook"]))
            assert browser.wait_for("document.body.dataset.present === 'Tools: Grasper, Hook'", timeout=10)
            chips = browser.evaluate(
                "[...document.querySelectorAll('#present .chip')].map(c => c.textContent)"
            )
            assert chips == ["Grasper", "Hook"]
            shown = browser.evaluate("document.getElementById('values').textContent")
            assert shown == "rsd remaining12.3 min"  # the tools' probabilities are not shown as minutes
            size = browser.evaluate("parseFloat(getComputedStyle(document.querySelector('.chip')).fontSize)")
            assert size >= 30  # 4.5vh of an 800 px window: readable across a room
            page.publish(_row(1, []))
            assert browser.wait_for("document.body.dataset.present === 'Tools: none'", timeout=10)
            assert browser.evaluate("document.body.dataset.phase") == "A"
            browser.screenshot(tmp_path / "tools.png")
    finally:
        page.close()
    assert (tmp_path / "tools.png").stat().st_size > 3000
