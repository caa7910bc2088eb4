//! railwatch for Python: the native half of the `railwatch` package
//! (`python/railwatch/`, which turns its JSON into dicts). It never opens
//! verbs: it asks the local agent over its state socket
//! (docs/STATE-API.md), or runs a scenario against simulated devices.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use railwatch_cli::state_client::{self, AskErrorKind, Changes};
use railwatch_runtime::lines::Line;
use railwatch_scenario::Scenario;
use railwatch_scenario::driver::{self, RunOptions};

create_exception!(_native, AgentUnavailable, PyException, "The agent cannot be reached, went away, or is not warm.");
create_exception!(
    _native,
    StreamCut,
    PyException,
    "The agent cut this stream reader off as too slow (it fell behind): open a new stream."
);
create_exception!(_native, ScenarioError, PyValueError, "A scenario that cannot be run, with where and why.");

fn seconds(timeout: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(timeout)
        .map_err(|_| PyValueError::new_err(format!("timeout {timeout}: need seconds >= 0")))
}

/// The agent's state document, as JSON text (`GET /v1/state`).
#[pyfunction]
#[pyo3(signature = (socket, timeout))]
fn state_json(py: Python<'_>, socket: PathBuf, timeout: f64) -> PyResult<String> {
    let timeout = seconds(timeout)?;
    py.allow_threads(|| {
        let reply = state_client::ask_text(&socket, timeout)?;
        Ok::<_, state_client::AskError>(reply)
    })
    .map_err(|e| AgentUnavailable::new_err(e.to_string()))
}

/// The agent's change stream, line by line (`GET /v1/state?watch=1`).
#[pyclass(unsendable)]
struct Stream {
    changes: Changes,
    timeout: Duration,
}

#[pymethods]
impl Stream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next line's JSON text; `TimeoutError` when none came within the
    /// timeout; `StreamCut` when the agent cut this reader off as too slow;
    /// `AgentUnavailable` when the agent went away.
    fn __next__(&mut self) -> PyResult<String> {
        match self.changes.next_line(self.timeout) {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(pyo3::exceptions::PyTimeoutError::new_err(format!(
                "no line from the agent within {} s",
                self.timeout.as_secs_f64()
            ))),
            Err(e) if e.kind == AskErrorKind::Cut => Err(StreamCut::new_err(e.to_string())),
            Err(e) => Err(AgentUnavailable::new_err(e.to_string())),
        }
    }
}

/// Opens the change stream.
#[pyfunction]
#[pyo3(signature = (socket, timeout))]
fn watch_stream(socket: PathBuf, timeout: f64) -> PyResult<Stream> {
    let timeout = seconds(timeout)?;
    let changes = Changes::open(&socket, timeout).map_err(|e| AgentUnavailable::new_err(e.to_string()))?;
    Ok(Stream { changes, timeout })
}

/// Runs a scenario (its TOML text; `name` says where it came from in
/// errors) against simulated devices in virtual time: the run's JSON
/// lines (docs/JSON.md), and whether every expectation held.
#[pyfunction]
#[pyo3(signature = (text, name))]
fn simulate_lines(py: Python<'_>, text: &str, name: &str) -> PyResult<(Vec<String>, bool)> {
    let scenario = Scenario::parse(text, name).map_err(|e| ScenarioError::new_err(e.to_string()))?;
    py.allow_threads(|| {
        let mut lines = Vec::new();
        let summary = driver::run(&scenario, &RunOptions::default(), |names, record| {
            if let Some(line) = Line::of(names, &record) {
                lines.push(serde_json::to_string(&line).unwrap_or_default());
            }
        })
        .map_err(|e| ScenarioError::new_err(format!("{name}: the run failed: {e}")))?;
        let held = summary.expectations.iter().all(|e| e.passed);
        Ok((lines, held))
    })
}

/// The native module: `railwatch._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(state_json, m)?)?;
    m.add_function(wrap_pyfunction!(watch_stream, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_lines, m)?)?;
    m.add_class::<Stream>()?;
    m.add("AgentUnavailable", m.py().get_type::<AgentUnavailable>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("StreamCut", m.py().get_type::<StreamCut>())?;
    m.add("DEFAULT_SOCKET", state_client::DEFAULT_SOCKET)?;
    Ok(())
}
