"""Episode statistics, public face: infos empty on ordinary steps, a small flat dict of numbers
at an episode's end. The code lives in :mod:`puffer_core.env.postprocess`; plugins and users
import it from here."""

from __future__ import annotations

from puffer_core.env.postprocess import (
    EpisodeStats,
    MultiAgentEpisodeStats,
    episode_info,
    kept_entries,
    numeric_scalars,
)

__all__ = ["EpisodeStats", "MultiAgentEpisodeStats", "episode_info", "kept_entries", "numeric_scalars"]
