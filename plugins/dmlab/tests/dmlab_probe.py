"""What a ``deepmind_lab`` module does on one seed and one action sequence, as JSON-able data.

Run against the real engine (in PufferTank, or any Python where it imports) and against the
TEST DOUBLE (``deepmind_lab_double``) by ``test_dmlab_engine.py``, which compares the two:
the action order, the observation spaces, the methods a Lab has, the episode's length and when it
ends, and how the seed is taken. Only numpy and the module under test are imported, so the
file runs as a script too: ``python dmlab_probe.py [module]`` prints the JSON.
"""

from __future__ import annotations

import importlib
import json
import sys

import numpy as np

LEVEL = "seekavoid_arena_01"
SEED = 7
WIDTH, HEIGHT = 64, 48
#: Steps of 4 frames, as the plugin's default action repeat; past the level's episode end.
STEPS, FRAMES_PER_STEP = 400, 4
OBSERVATIONS = ["RGB_INTERLEAVED", "INSTR"]


def _spec(entry: dict) -> dict:
    dtype = entry["dtype"]
    return {
        "name": entry["name"],
        "shape": list(entry["shape"]),
        "dtype": dtype.__name__ if isinstance(dtype, type) else str(dtype),
    }


def probe(module) -> dict:
    """Specs, then one episode of seed SEED under fixed pseudo-random actions, summarised."""
    config = {"width": str(WIDTH), "height": str(HEIGHT)}
    lab = module.Lab(LEVEL, list(OBSERVATIONS), config=config, renderer="software")
    action_spec = lab.action_spec()
    specs = {entry["name"]: _spec(entry) for entry in lab.observation_spec()}
    lab.reset(seed=SEED)
    rng = np.random.default_rng(0)
    frames, changed, first = 0, 0, None
    previous = lab.observations()["RGB_INTERLEAVED"].copy()
    first_frame = previous.copy()
    first_obs = {name: _value(value) for name, value in lab.observations().items()}
    for _ in range(STEPS):
        action = np.array([rng.integers(a["min"], a["max"] + 1) for a in action_spec], dtype=np.intc)
        lab.step(action, num_steps=FRAMES_PER_STEP)
        frames += FRAMES_PER_STEP
        if not lab.is_running():
            first = frames
            break
        frame = lab.observations()["RGB_INTERLEAVED"]
        changed += bool((frame != previous).any())
        previous = frame.copy()
    # The same seed again in this Lab: the real engine carries state across episodes.
    lab.reset(seed=SEED)
    again = lab.observations()["RGB_INTERLEAVED"]
    result = {
        "same_seed_same_lab_same_first_frame": bool((again == first_frame).all()),
        "action_spec": [[a["name"], int(a["min"]), int(a["max"])] for a in action_spec],
        "observation_spec": [specs[name] for name in OBSERVATIONS],
        "methods": sorted(name for name in dir(lab) if not name.startswith("_")),
        "first_observation": first_obs,
        "episode_frames": first,
        "frames_changed": changed,
        "num_steps": int(lab.num_steps()),
    }
    lab.close()
    return result


def _value(value) -> dict:
    if isinstance(value, np.ndarray):
        return {"type": "ndarray", "shape": list(value.shape), "dtype": str(value.dtype)}
    return {"type": type(value).__name__}


if __name__ == "__main__":
    print(json.dumps(probe(importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "deepmind_lab"))))


#: Attributes of the double that the real Lab lacks: the double's records and test helpers.
DOUBLE_ONLY = frozenset(
    "ACTION_SPEC actions config episode episode_frames frames height instances level level_cache named_action "
    "observation_names renderer reset_calls seed status step_calls width episodes_run".split()
)
#: Methods of the real Lab the double does not have (the plugin does not call them).
NOT_DOUBLED = frozenset({"properties", "read_property", "write_property"})


def differences(real: dict, double: dict) -> list[str]:
    """Where the double's probe differs from the real engine's (what the plugin relies on)."""
    found = [
        f"{key}: engine {real[key]!r}, double {double[key]!r}"
        for key in (
            "action_spec",
            "observation_spec",
            "first_observation",
            "episode_frames",
            "num_steps",
            "same_seed_same_lab_same_first_frame",
        )
        if real[key] != double[key]
    ]
    extra = set(double["methods"]) - set(real["methods"]) - DOUBLE_ONLY
    missing = set(real["methods"]) - set(double["methods"]) - NOT_DOUBLED
    if extra:
        found.append(f"the double has {sorted(extra)}, the engine's Lab does not")
    if missing:
        found.append(f"the engine's Lab has {sorted(missing)}, the double does not")
    if real["frames_changed"] < 0.9 * (real["episode_frames"] or STEPS * FRAMES_PER_STEP) / FRAMES_PER_STEP - 1:
        found.append(f"the engine's frames changed on {real['frames_changed']} steps only")
    return found
