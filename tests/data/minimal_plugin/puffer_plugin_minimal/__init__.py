"""A minimal Puffer plugin: one env built from gymnasium's CartPole."""

import puffer_core


def make_cartpole():
    import gymnasium

    return gymnasium.make("CartPole-v1")


@puffer_core.hookimpl
def puffer_envs():
    return [puffer_core.EnvSpec("minimal/cartpole", make_cartpole, description="minimal plugin's cartpole")]
