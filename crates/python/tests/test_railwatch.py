"""railwatch's Python module against scenarios and against a live agent
(`railwatch watch` under the fake libibverbs), run by `cargo xtask python`.

The live tests need RAILWATCH_BIN (the binary, built with `verbs`) and
RAILWATCH_FAKE_LIB (the fake libibverbs's directory); without them they
are skipped, and say so.
"""

from __future__ import annotations

import glob
import json
import os
import pathlib
import signal
import socket as sockets
import subprocess
import time
from typing import Any, Dict, List

import jsonschema
import pytest

import railwatch

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCENARIOS = sorted(glob.glob(str(ROOT / "crates/cli/scenarios/*.toml")))
SCHEMA: Dict[str, Any] = json.loads((ROOT / "docs/state.schema.json").read_text())


def check_document(doc: Dict[str, Any]) -> None:
    """`doc` is a state document as docs/state.schema.json says."""
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)


def check_line(line: Dict[str, Any]) -> None:
    """`line` is a stream line as docs/state.schema.json says."""
    schema = dict(SCHEMA, **{"$ref": "#/$defs/stream_line"})
    jsonschema.validate(line, schema, cls=jsonschema.Draft202012Validator)


def test_the_schema_is_a_valid_json_schema_of_this_version() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["title"] == railwatch.SCHEMA
    with pytest.raises(jsonschema.ValidationError):
        check_line({"kind": "rail", "t_ms": 1, "warm": True, "rail": {"rail": "mlx5_0/1"}})
    with pytest.raises(jsonschema.ValidationError):
        check_document({"schema": "railwatch.state/2", "t_ms": 0, "warm": True, "host": {}, "rails": []})


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: pathlib.Path(p).stem)
def test_every_builtin_scenario_runs_and_holds(path: str) -> None:
    lines, held = railwatch.simulate(pathlib.Path(path).read_text(), path)
    assert held, f"{path}: an expectation failed"
    assert lines and all("t_ms" in line and "kind" in line for line in lines)


def test_a_bad_scenario_is_an_error_naming_where() -> None:
    with pytest.raises(railwatch.ScenarioError, match="bad.toml:1"):
        railwatch.simulate("[[device]\n", "bad.toml")


def test_no_agent_is_unavailable_never_an_empty_list(tmp_path: pathlib.Path) -> None:
    socket = str(tmp_path / "state.sock")
    with pytest.raises(railwatch.AgentUnavailable, match="not running"):
        railwatch.usable_rails(socket)
    with pytest.raises(railwatch.AgentUnavailable):
        next(railwatch.watch(socket))


LIVE = os.environ.get("RAILWATCH_BIN") and os.environ.get("RAILWATCH_FAKE_LIB")
live = pytest.mark.skipif(not LIVE, reason="RAILWATCH_BIN and RAILWATCH_FAKE_LIB not set")


class Agent:
    """`railwatch watch --state-socket` under the fake, with a control FIFO."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.socket = str(tmp / "state.sock")
        self.fifo = tmp / "control"
        os.mkfifo(self.fifo)
        env = dict(os.environ)
        env.update(
            LD_LIBRARY_PATH=os.environ["RAILWATCH_FAKE_LIB"],
            FAKE_IBVERBS_DEVICES="mlx5_0:4/128/2;mlx5_3:1/128/2",
            FAKE_IBVERBS_CONTROL=str(self.fifo),
            RUST_LOG="error",
        )
        self.proc = subprocess.Popen(
            [os.environ["RAILWATCH_BIN"], "watch", "--state-socket", self.socket],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                railwatch.usable_rails(self.socket)
                return
            except railwatch.AgentUnavailable:
                assert time.monotonic() < deadline, "the agent never answered"
                time.sleep(0.05)

    def control(self, line: str) -> None:
        with open(self.fifo, "w") as f:
            f.write(line + "\n")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


@pytest.fixture
def agent(tmp_path: pathlib.Path):  # type: ignore[no-untyped-def]
    a = Agent(tmp_path)
    yield a
    a.stop()


def raw_stream(path: str) -> sockets.socket:
    """A stream reader on a socket of its own (HTTP/1.0: the lines as they are)."""
    s = sockets.socket(sockets.AF_UNIX)
    s.settimeout(20)
    s.connect(path)
    s.sendall(b"GET /v1/state?watch=1 HTTP/1.0\r\n\r\n")
    return s


def raw_lines(s: sockets.socket) -> List[Dict[str, Any]]:
    """Every line until the agent ends the stream."""
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    body = data.split(b"\r\n\r\n", 1)[1]
    return [json.loads(line) for line in body.splitlines()]


@live
def test_snapshot_and_usable_rails_from_the_agent(agent: Agent) -> None:
    doc = railwatch.snapshot(agent.socket)
    check_document(doc)
    assert doc["schema"] == "railwatch.state/1" and doc["warm"] is True
    verdicts = {r["rail"]: r["health"]["verdict"] for r in doc["rails"]}
    assert verdicts == {"mlx5_0/1": "Healthy", "mlx5_3/1": "Unhealthy"}
    assert railwatch.usable_rails(agent.socket) == ["mlx5_0:1"]
    out = subprocess.run(
        [os.environ["RAILWATCH_BIN"], "rails", "--socket", agent.socket], capture_output=True, text=True
    )
    assert out.stdout.split() == railwatch.usable_rails(agent.socket), "rails and usable_rails agree"


@live
def test_usable_rails_takes_under_a_millisecond(agent: Agent) -> None:
    railwatch.usable_rails(agent.socket)
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        railwatch.usable_rails(agent.socket)
    per_call = (time.perf_counter() - start) / n
    print(f"usable_rails(): {per_call * 1e6:.0f} us per call")


@live
def test_watch_hears_a_flap_then_the_agent_going_away(agent: Agent) -> None:
    changes = railwatch.watch(agent.socket, timeout=10.0)
    first = next(changes)
    assert first["kind"] == "state"
    check_line(first)
    agent.control("port 0 1 1\nevent 0 10 1")
    down = next(c for c in changes if c["kind"] == "rail")
    check_line(down)
    assert down["rail"]["rail"] == "mlx5_0/1" and down["rail"]["usable"] is False
    assert railwatch.usable_rails(agent.socket) == []
    agent.control("port 0 1 4\nevent 0 9 1")
    up = next(c for c in changes if c["kind"] == "rail" and c["rail"]["usable"])
    assert up["rail"]["health"]["verdict"] == "Healthy"
    agent.stop()
    with pytest.raises(railwatch.AgentUnavailable):
        for _ in changes:
            pass


@live
def test_a_reader_that_falls_behind_is_told_it_was_cut(agent: Agent) -> None:
    changes = railwatch.watch(agent.socket, timeout=10.0)
    assert next(changes)["kind"] == "state"
    raw = raw_stream(agent.socket)
    # The readers read nothing while the rail flaps far more often than
    # the socket's buffers and the stream's 64-line backlog hold.
    flap = "port 0 1 1\nevent 0 10 1\nport 0 1 4\nevent 0 9 1"
    for _ in range(600):
        agent.control(flap)
        time.sleep(0.002)
    read = 0
    with pytest.raises(railwatch.StreamCut, match="lines behind"):
        for _ in changes:
            read += 1
    assert read >= 64
    lines = raw_lines(raw)
    for line in lines:
        check_line(line)
    assert lines[-1]["kind"] == "cut" and lines[-1]["reason"] == "slow_reader"
    assert all(line["kind"] != "cut" for line in lines[:-1])
    # The agent is still there: a new stream starts with the whole state.
    assert next(railwatch.watch(agent.socket))["kind"] == "state"
    assert not issubclass(railwatch.StreamCut, railwatch.AgentUnavailable)


@live
def test_a_quiet_stream_hears_a_heartbeat_as_the_schema_says(agent: Agent) -> None:
    changes = railwatch.watch(agent.socket, timeout=8.0)
    assert next(changes)["kind"] == "state"
    beat = next(changes)
    assert beat["kind"] == "heartbeat"
    check_line(beat)


@live
def test_a_quiet_stream_times_out(agent: Agent) -> None:
    changes = railwatch.watch(agent.socket, timeout=0.3)
    assert next(changes)["kind"] == "state"
    with pytest.raises(TimeoutError):
        next(changes)
