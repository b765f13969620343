"""The Ray instance the Ray backend starts itself when it is given none, safely.

Ray's services (GCS, raylet with its node and object managers, the agents, every worker's
gRPC server) run whatever code a client sends them, so who can reach them matters:

- Ray is already initialised (the user called ``ray.init``), or ``address`` /
  ``RAY_ADDRESS`` names a cluster (:mod:`.connect`): that instance is used as it is, its
  security the user's choice.
- Otherwise the backend starts a Ray instance of its own on this machine in Ray's
  single-machine mode (the one Ray uses on macOS and Windows): the node's address is
  loopback, and every service binds to it (Ray offers no bind option on Linux short of this;
  ``_node_ip_address="127.0.0.1"`` alone is replaced by the machine's address). The
  dashboard is off. Ray's token authentication must be on as well (Ray turns it on by
  default for a new local instance, reading the token from ``RAY_AUTH_TOKEN``,
  ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``): loopback keeps the network out, the
  token keeps out the machine's other users. The token file is written before Ray starts,
  readable by its owner only from its creation, and one readable by others is replaced, never
  reused; Ray's files go to a temporary directory of this user's only (:mod:`.private`).
  With token authentication off (``RAY_AUTH_MODE`` set to anything but ``token``, or a Ray
  without it) the backend refuses to start Ray unless the caller passes
  ``allow_unauthenticated_ray=True``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.vector.ray.private import private_temp_dir, private_token, remove_at_exit

__all__ = ["AUTH_MODE", "OPT_IN", "single_machine_mode", "start_local_ray", "token_auth_on"]

AUTH_MODE = "RAY_AUTH_MODE"  # Ray's switch: token authentication is on when unset or "token"
OPT_IN = "allow_unauthenticated_ray"  # the Ray backend's parameter that accepts it off
_SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": the node's address is loopback


def start_local_ray(ray: Any, allow_unauthenticated_ray: bool = False, num_cpus: int | None = None) -> None:
    """A new Ray instance on this machine, its services on loopback, with token authentication
    unless ``allow_unauthenticated_ray``; APIUsageError (nothing started) when that is off.
    ``num_cpus``: the CPUs Ray schedules on (None: Ray counts them)."""
    why = _why_unauthenticated(ray)
    if why is not None and not allow_unauthenticated_ray:
        raise APIUsageError(_refusal(*why))
    if why is None:
        private_token()  # before Ray starts: Ray would write it readable by others
    private = private_temp_dir()  # Ray makes its own temp dir 0777: it lives inside this 0700 one
    try:
        with single_machine_mode():
            # "local": a new instance, never one a `ray start` left recorded in Ray's temp dir
            ray.init(
                address="local",
                num_cpus=num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                _temp_dir=os.path.join(private, "ray"),
            )
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
    remove_at_exit(ray, private)
    if not token_auth_on() and not allow_unauthenticated_ray:  # the environment said "token", Ray did not
        ray.shutdown()
        raise APIUsageError(
            _refusal(f"Ray {ray.__version__} started it without token authentication", f"set {AUTH_MODE}=token")
        )


def token_auth_on() -> bool:
    """Whether this process's Ray runs with token authentication."""
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode
    except ImportError:  # a Ray without token authentication
        return False
    return get_authentication_mode() == AuthenticationMode.TOKEN


def _why_unauthenticated(ray: Any) -> tuple[str, str] | None:
    """Why a Ray instance started now would have no token authentication, and the fix; None if it would."""
    try:
        from ray._raylet import AuthenticationMode, get_authentication_mode  # noqa: F401
    except ImportError:
        return f"Ray {ray.__version__} has no token authentication", "upgrade Ray (pip install -U ray)"
    mode = os.environ.get(AUTH_MODE)
    # As Ray decides for a new local instance: unset means on, any value but "token" off.
    if mode is not None and mode.lower() != "token":
        return f"{AUTH_MODE}={mode!r} turns it off", f"unset {AUTH_MODE} (or set it to 'token')"
    return None


def _refusal(why: str, fix: str) -> str:
    return (
        f"backend='ray' does not start a local Ray instance without token authentication ({why}): anyone who "
        f"can reach its services can run code as you; {fix}, or accept that with vector_kwargs={{{OPT_IN!r}: True}}"
    )


@contextlib.contextmanager
def single_machine_mode() -> Iterator[None]:
    """Ray's single-machine mode while Ray starts: the node address it picks is loopback, and
    the GCS, raylet, agents and workers bind to loopback when the node address is loopback (to
    every interface, or the machine's address, otherwise). Ray reads the switch once, at
    import: its constant is set too."""
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - a Ray laid out differently: its default binding
        ray_constants = None
    saved_env = os.environ.get(_SINGLE_MACHINE)
    saved = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    os.environ[_SINGLE_MACHINE] = "0"  # for the processes Ray starts (they read it at import)
    if saved is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if saved is not None:
            ray_constants.ENABLE_RAY_CLUSTER = saved
        if saved_env is None:
            os.environ.pop(_SINGLE_MACHINE, None)
        else:
            os.environ[_SINGLE_MACHINE] = saved_env
