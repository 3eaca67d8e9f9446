"""A worker removed while data is sent to it is a lost worker, which the driver recovers
from, not an internal error."""
import pytest

pytest.importorskip("distributed")

from topictk.inference.cluster import SendFailed, WorkerLost, lost_as, send_to  # noqa: E402


class _Client:
    """Answers scatter as the scheduler does when the receiving worker was just removed."""

    def __init__(self, missing: str):
        self.missing = missing

    def scatter(self, data, workers, **options):
        raise KeyError(self.missing)


def test_a_removed_worker_is_a_lost_worker():
    address = "tcp://127.0.0.1:32801"
    with pytest.raises(SendFailed, match="32801"):
        send_to(_Client(address), [1, 2], address)
    with pytest.raises(WorkerLost, match="while the shards were sent out"):
        with lost_as("while the shards were sent out"):
            send_to(_Client(address), [1, 2], address)


def test_another_key_error_is_not_taken_for_a_lost_worker():
    with pytest.raises(KeyError, match="something else"):
        send_to(_Client("something else"), [1], "tcp://127.0.0.1:32801")
