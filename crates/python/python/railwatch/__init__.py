"""Which RDMA rails of this host can carry traffic, asked of the local
railwatch agent (``railwatch watch --state-socket``; docs/STATE-API.md),
and scenario runs against simulated devices, with no NIC.

It never opens libibverbs itself::

    import railwatch

    rails = railwatch.usable_rails()          # ["mlx5_0:1", "mlx5_3:1"]
    os.environ["NCCL_IB_HCA"] = "=" + ",".join(rails)

    for change in railwatch.watch(timeout=10.0):
        if change["kind"] == "rail":
            print(change["rail"]["rail"], change["rail"]["health"]["verdict"])

    lines, held = railwatch.simulate(open("flap.toml").read())
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Tuple

from railwatch._native import (
    DEFAULT_SOCKET,
    AgentUnavailable,
    ScenarioError,
    StreamCut,
    simulate_lines,
    state_json,
    watch_stream,
)

__all__ = [
    "DEFAULT_SOCKET",
    "SCHEMA",
    "AgentUnavailable",
    "ScenarioError",
    "StreamCut",
    "snapshot",
    "usable_rails",
    "watch",
    "simulate",
]

SCHEMA = "railwatch.state/1"


def snapshot(socket: str = DEFAULT_SOCKET, timeout: float = 5.0) -> Dict[str, Any]:
    """The agent's whole state document (``GET /v1/state``) as a dict.

    Raises ``AgentUnavailable`` when the agent cannot be reached within
    ``timeout`` seconds or answers with another schema.
    """
    doc: Dict[str, Any] = json.loads(state_json(str(socket), float(timeout)))
    if doc.get("schema") != SCHEMA:
        raise AgentUnavailable(f"railwatch at {socket}: schema {doc.get('schema')!r}, this module reads {SCHEMA!r}")
    return doc


def usable_rails(socket: str = DEFAULT_SOCKET, timeout: float = 5.0) -> List[str]:
    """The rails work may be sent down, as ``device:port``, in the agent's
    order: the same list ``railwatch rails`` prints (the agent's ``usable``).

    Raises ``AgentUnavailable`` when the agent cannot be reached or is not
    warm (it has not attached every device present at its start yet): an
    empty list always means "none usable", never "not known".
    """
    doc = snapshot(socket, timeout)
    if not doc["warm"]:
        raise AgentUnavailable(f"railwatch at {socket}: starting: not every device was attached yet")
    return [f"{r['device']}:{r['port']}" for r in doc["rails"] if r["usable"]]


def watch(socket: str = DEFAULT_SOCKET, timeout: float = 10.0) -> Iterator[Dict[str, Any]]:
    """The agent's changes as they happen (``GET /v1/state?watch=1``): the
    whole document first (``kind`` ``"state"``), then ``"rail"``,
    ``"warm"`` and ``"heartbeat"`` lines, each a dict.

    Raises ``TimeoutError`` when no line came within ``timeout`` seconds
    (the agent sends a heartbeat every 5 s), ``AgentUnavailable`` when the
    agent cannot be reached or goes away, ``StreamCut`` when the agent cut
    this reader off for reading too slowly (64 lines behind; it is still
    there: open a new stream, which starts with the whole state again).
    """
    for line in watch_stream(str(socket), float(timeout)):
        change: Dict[str, Any] = json.loads(line)
        yield change


def simulate(scenario: str, name: str = "scenario") -> Tuple[List[Dict[str, Any]], bool]:
    """Runs a scenario (its TOML text, docs/SCENARIOS.md) against simulated
    devices in virtual time: the run's lines (docs/JSON.md) as dicts, and
    whether every expectation held. ``name`` is where errors say it came
    from. Raises ``ScenarioError`` for a scenario that cannot be run.
    """
    lines, held = simulate_lines(scenario, name)
    parsed: List[Dict[str, Any]] = [json.loads(line) for line in lines]
    return parsed, held
