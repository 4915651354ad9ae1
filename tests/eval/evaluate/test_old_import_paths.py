"""Old import paths (deprecated aliases since the README and docs name the new ones) still give the objects
of their new homes; their DeprecationWarning is checked in tests/test_moved_modules.py."""

from __future__ import annotations

import pytest

from plstitch_eval.protocols import tools


@pytest.mark.filterwarnings("ignore:.*has moved to:DeprecationWarning")
def test_documented_old_module_paths_still_import() -> None:
    from plstitch_eval import metrics, temporal_protocol, tool_presence
    from plstitch_eval.metrics import clustering, frames, segments
    from plstitch_eval.protocols import temporal

    assert tool_presence.run_tool_linear is tools.run_tool_linear  # an old path
    assert temporal_protocol.run_temporal is temporal.run_temporal  # an old path
    assert metrics.segment_metrics is segments.segment_metrics  # README: `plstitch_eval.metrics`
    assert metrics.frame_metrics is frames.frame_metrics
    assert metrics.clustering_scores is clustering.clustering_scores  # docs/figures.md
