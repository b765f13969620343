"""The stored probe_1 run (``tests/data/checkpoints/puffer-train-1.pt``, see test_checkpoint.py)
and checkpoints made from it, for the tests of what a checkpoint may hold."""

from __future__ import annotations

from pathlib import Path

OLD_CHECKPOINT = Path(__file__).parents[1] / "data" / "checkpoints" / "puffer-train-1.pt"


def write_checkpoint(directory: Path, **changes) -> Path:
    """A real checkpoint (probe_1, hidden_size 4) with ``changes``, as ``directory/policy.pt``."""
    import torch  # the callers require it first (tests/optional.py)

    data = torch.load(OLD_CHECKPOINT, weights_only=True)
    data.update(changes)
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(data, directory / "policy.pt")
    return directory / "policy.pt"
