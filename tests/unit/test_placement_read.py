"""A stored placement read back in one place (ti_hub/domain/placement.py) for every reader."""

from types import SimpleNamespace

from ti_hub.domain.placement import Placed, placed
from ti_hub.scheduler.model import Allocation
from ti_hub.ops.queueing import placement_json, placement_of


def test_a_stored_placement_reads_back_as_the_allocations_it_was_written_from():
    allocs = (Allocation("n1", "A100", (0, 3), 4.0, 8192), Allocation("n2", "A100", (), 0.5, 512))
    stored = placement_json(allocs)
    assert placed(stored) == [Placed("n1", (0, 3), 4.0, 8192), Placed("n2", (), 0.5, 512)]
    assert placement_of(SimpleNamespace(placement=stored, device_type="A100")) == allocs


def test_no_placement_and_missing_fields_read_as_nothing_rather_than_failing():
    assert placed(None) == [] and placed({}) == [] and placed({"instances": None}) == []
    # a row written before cores and memory were stored
    assert placed({"instances": [{"node": "n1", "devices": ["2"]}]}) == [Placed("n1", (2,), 0.0, 0)]
