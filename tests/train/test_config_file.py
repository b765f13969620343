"""A run's settings as a TOML file (puffer_core.train.config_file): read, checked as --set is, and written whole
so that a run repeats from its folder. Torch-free; tests/train/test_sweeps.py trains from a written one."""

from __future__ import annotations

import pytest

from puffer_core.errors import APIUsageError
from puffer_core.train.config import PPOConfig
from puffer_core.train.config_file import read_config, write_config


def test_a_file_holds_settings_an_env_and_its_kwargs(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('env = "nethack/score"\nsteps = 10_000_000\nlearning_rate = 3e-4\nanneal_lr = false\n\n'
                    "[env_kwargs]\nmax_episode_steps = 5000\n")  # fmt: skip
    found = read_config(path)
    assert found.env == "nethack/score" and found.env_kwargs == {"max_episode_steps": 5000}
    assert found.settings == {"steps": 10_000_000, "learning_rate": 3e-4, "anneal_lr": False}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("lr = 0.001\n", "unknown PPO setting 'lr' (did you mean learning_rate?)"),
        ("num_envs = 0\n", "num_envs"),
        ("steps = 'many'\n", "steps"),
        ("[training]\nsteps = 1\n", "[training] is not a table of a config file (only [env_kwargs] is)"),
        ("env = 3\n", "env must be an env id"),
        ("env_kwargs = 3\n", "env_kwargs must be a table"),
        ("steps = = 1\n", "is not TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_it_and_the_key(tmp_path, text, says):
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(APIUsageError) as caught:
        read_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}") and says in message and "\n" not in message


def test_a_run_written_whole_reads_back_as_the_same_settings(tmp_path):
    config = PPOConfig().replace(steps=4096, num_envs=8, learning_rate=0.001, device=None, seed=3)
    path = write_config(tmp_path / "config.toml", "classic/cartpole", config, {"max_episode_steps": 100},
                        device="cpu")  # fmt: skip
    text = path.read_text()
    assert text.startswith("# A puffer train run's complete settings") and "# It ran on cpu." in text
    assert "# device: not set (chosen when the run starts)" in text  # None is TOML's to leave out
    again = read_config(path)
    expected = {key: value for key, value in config.to_dict().items() if value is not None}
    assert again.settings == expected and again.env == "classic/cartpole"
    assert again.env_kwargs == {"max_episode_steps": 100}
    assert PPOConfig().replace(**again.settings) == config


def test_kwargs_toml_cannot_hold_stand_as_comments(tmp_path):
    path = write_config(tmp_path / "config.toml", None, PPOConfig(), {"frames": [1, 2], "odd": {1, 2}, "x": None})
    text = path.read_text()
    assert "frames = [1, 2]" in text and "# odd = {1, 2} (not expressible in TOML)" in text
    assert read_config(path).env_kwargs == {"frames": [1, 2]} and read_config(path).env is None
