"""railwatch's Python module against scenarios and against a live agent
(`railwatch watch` under the fake libibverbs), run by `cargo xtask python`.

The live tests need RAILWATCH_BIN (the binary, built with `verbs`) and
RAILWATCH_FAKE_LIB (the fake libibverbs's directory); without them they
are skipped, and say so.
"""

from __future__ import annotations

import glob
import os
import pathlib
import signal
import subprocess
import time

import pytest

import railwatch

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCENARIOS = sorted(glob.glob(str(ROOT / "crates/cli/scenarios/*.toml")))


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


@live
def test_snapshot_and_usable_rails_from_the_agent(agent: Agent) -> None:
    doc = railwatch.snapshot(agent.socket)
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
    agent.control("port 0 1 1\nevent 0 10 1")
    down = next(c for c in changes if c["kind"] == "rail")
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
def test_a_quiet_stream_times_out(agent: Agent) -> None:
    changes = railwatch.watch(agent.socket, timeout=0.3)
    assert next(changes)["kind"] == "state"
    with pytest.raises(TimeoutError):
        next(changes)
