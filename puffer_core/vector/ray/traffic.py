"""What crosses between the main process and each Ray actor: ``envs.stats["traffic"]``.

Counted per ``reset`` / ``step`` round trip, cheaply: the bytes sent are the action array's
``nbytes`` (a reset sends its pickled plan), the bytes received the ``nbytes`` of the arrays
returned plus the pickled size of the infos when there are any (episode statistics keep
them empty on ordinary steps). Ray's own framing and task metadata are not counted.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = ["Traffic"]


class Traffic:
    """Round trips and bytes each way, per worker."""

    def __init__(self, workers: int):
        self.calls = [0] * workers
        self.sent = [0] * workers
        self.received = [0] * workers

    def sent_to(self, w: int, payload: Any) -> None:
        """One call to worker ``w`` carrying ``payload`` (an array, or anything picklable)."""
        self.calls[w] += 1
        self.sent[w] += payload.nbytes if hasattr(payload, "nbytes") else len(pickle.dumps(payload))

    def received_from(self, w: int, arrays: tuple, infos: list | None) -> None:
        """Worker ``w``'s answer: its rows' arrays and its non-empty infos."""
        size = sum(array.nbytes for array in arrays)
        if infos:
            size += len(pickle.dumps(infos))
        self.received[w] += size

    def as_dict(self) -> dict[str, Any]:
        return {
            "sent_bytes": sum(self.sent),
            "received_bytes": sum(self.received),
            "workers": [
                {"worker": w, "calls": calls, "sent_bytes": sent, "received_bytes": received}
                for w, (calls, sent, received) in enumerate(zip(self.calls, self.sent, self.received))
            ],
        }
