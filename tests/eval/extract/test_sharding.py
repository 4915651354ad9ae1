"""`plstitch_eval.extract.sharding`: the ranks' shares are disjoint and cover every video; one process shares
nothing (the 2-rank run itself: test_distributed.py)."""

from __future__ import annotations

from plstitch_eval.extract.sharding import broadcast_error, gather_results, my_share
from plstitch_eval.extract.summary import VideoResult
from plstitch_eval.utils.distributed import DistInfo


def test_each_rank_takes_every_world_size_th_video_from_its_rank():
    shares = [my_share(7, DistInfo(rank=r, world_size=3)) for r in range(3)]
    assert shares == [[0, 3, 6], [1, 4], [2, 5]]
    assert my_share(4, DistInfo()) == [0, 1, 2, 3]
    assert my_share(1, DistInfo(rank=1, world_size=2)) == []


def test_one_process_keeps_its_results_and_its_setup_error_is_its_own():
    results = [VideoResult("a", "done", frames=3)]
    assert gather_results(DistInfo(), results) is results
    broadcast_error(DistInfo(), "rank 0 failed")  # not distributed: nothing to share, nothing raised
