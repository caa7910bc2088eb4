//! What the packages ship from `dist/` (docs/INSTALL.md): the conffile
//! `/etc/railwatch/railwatch.toml` (every key there, commented out at its
//! default) and the Kubernetes manifests (parsed, and checked for what a
//! node agent needs and no more). No cluster runs here: these checks are
//! all that is tested of the manifests.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

fn dist(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist").join(path)
}

/// `watch --check --json` with `args`: the effective settings.
fn settings(args: &[&str]) -> Value {
    let mut all = vec!["watch", "--check", "--json"];
    all.extend_from_slice(args);
    let out = common::railwatch(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{all:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(line["valid"], true);
    line["settings"].clone()
}

/// The conffile with every `#key = value` and `#[table]` line uncommented.
fn uncommented(text: &str) -> String {
    let is_setting = |l: &str| {
        let rest = l.strip_prefix('#').unwrap_or("");
        rest.starts_with('[')
            || rest.split_once(" = ").is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    };
    text.lines().map(|l| if is_setting(l) { &l[1..] } else { l }).collect::<Vec<_>>().join("\n")
}

/// Every leaf key of the settings, dotted (`damping.suppress`).
fn leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, v) in map {
                leaves(v, &format!("{prefix}{k}."), out);
            }
        }
        _ => out.push(prefix.trim_end_matches('.').to_owned()),
    }
}

#[test]
fn the_conffile_as_shipped_changes_nothing() {
    let file = dist("railwatch.toml");
    assert_eq!(settings(&["--config", file.to_str().unwrap()]), settings(&[]));
}

/// Uncommented, every key holds its default; the examples for keys with
/// none (`include`, `[metrics]`) and the `[damping]` table (which turns
/// damping on, at its defaults) are what the matching flags give.
#[test]
fn every_key_is_in_the_conffile_at_its_default() {
    let text = std::fs::read_to_string(dist("railwatch.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("railwatch.toml");
    std::fs::write(&file, uncommented(&text)).unwrap();
    let flags = [
        "--damping",
        "--include",
        "mlx5_0",
        "--include",
        "mlx5_1",
        "--metrics-listen",
        "127.0.0.1:9477",
        "--textfile",
        "/var/lib/railwatch/railwatch.prom",
    ];
    let expected = settings(&flags);
    assert_eq!(settings(&["--config", file.to_str().unwrap()]), expected);
    let mut keys = Vec::new();
    leaves(&expected, "", &mut keys);
    assert!(keys.len() > 25, "{keys:?}");
    for key in keys {
        let (table, name) = key.rsplit_once('.').map_or((None, key.as_str()), |(t, n)| (Some(t), n));
        let header = table.map(|t| text.find(&format!("\n#[{t}]\n")).unwrap_or_else(|| panic!("no #[{t}]")));
        let at = text.find(&format!("\n#{name} = ")).unwrap_or_else(|| panic!("no #{name} in the conffile"));
        if let Some(header) = header {
            assert!(at > header, "{key}: not under its table");
        }
    }
}

fn yaml(name: &str) -> Value {
    let text = std::fs::read_to_string(dist(&format!("kubernetes/{name}"))).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("kubernetes/{name}: {e}"))
}

/// The DaemonSet: host network, `system-node-critical`, the three host
/// paths, a readiness probe on warm, limits, no privilege.
#[test]
fn the_daemonset_is_a_least_privileged_node_agent() {
    let ds = yaml("daemonset.yaml");
    assert_eq!((ds["apiVersion"].as_str(), ds["kind"].as_str()), (Some("apps/v1"), Some("DaemonSet")));
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert_eq!(pod["automountServiceAccountToken"], false);
    // Off by default: on only where a node is labelled.
    assert_eq!(pod["nodeSelector"]["railwatch/enabled"], "true");
    assert_eq!(ds["spec"]["selector"]["matchLabels"], ds["spec"]["template"]["metadata"]["labels"]);
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["image"], format!("railwatch:{}", env!("CARGO_PKG_VERSION")));

    let volumes = pod["volumes"].as_array().unwrap();
    let host_path = |name: &str| volumes.iter().find(|v| v["name"] == name).map(|v| v["hostPath"]["path"].clone());
    let mounts = c["volumeMounts"].as_array().unwrap();
    for (path, read_only) in [("/sys", true), ("/dev/infiniband", true), ("/run/railwatch", false)] {
        let mount = mounts.iter().find(|m| m["mountPath"] == path).unwrap_or_else(|| panic!("no mount at {path}"));
        assert_eq!(host_path(mount["name"].as_str().unwrap()), Some(Value::from(path)), "{path}");
        assert_eq!(mount["readOnly"].as_bool().unwrap_or(false), read_only, "{path}");
    }
    assert_eq!(volumes.len(), 3, "no other volume");

    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(sc["capabilities"]["add"].is_null());
    assert!(pod["hostPID"].is_null() && pod["hostIPC"].is_null());

    for key in ["cpu", "memory"] {
        assert!(c["resources"]["limits"][key].is_string(), "no {key} limit");
        assert!(c["resources"]["requests"][key].is_string(), "no {key} request");
    }

    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args[0], "watch");
    let after = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
    assert_eq!(after("--state-socket"), Some("/run/railwatch/state.sock"));
    assert_eq!(after("--config"), Some("/etc/railwatch/railwatch.toml"));
    let port = after("--metrics-listen").and_then(|a| a.rsplit_once(':')).map(|(_, p)| p.parse::<u64>().unwrap());
    assert_eq!(port, c["ports"][0]["containerPort"].as_u64());

    // Ready when warm: `check --min-usable 0` exits 0 once warm, 2 before.
    let probe: Vec<&str> =
        c["readinessProbe"]["exec"]["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(&probe[..4], ["/usr/bin/railwatch", "check", "--min-usable", "0"]);
    assert_eq!(probe[4..], ["--socket", "/run/railwatch/state.sock"]);
    let out = common::railwatch(&["check", "--min-usable", "0", "--socket", "/nonexistent/state.sock"]);
    assert_eq!(out.status.code(), Some(2), "not ready without an agent");
}

#[test]
fn the_service_selects_the_daemonsets_pods() {
    let ds = yaml("daemonset.yaml");
    let svc = yaml("service.yaml");
    assert_eq!(svc["kind"], "Service");
    assert_eq!(svc["metadata"]["namespace"], ds["metadata"]["namespace"]);
    assert_eq!(svc["spec"]["selector"], ds["spec"]["template"]["metadata"]["labels"]);
    let port = &svc["spec"]["ports"][0];
    let container_port = &ds["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(port["targetPort"], container_port["name"]);
    assert_eq!(port["port"], container_port["containerPort"]);
    let ns = yaml("namespace.yaml");
    assert_eq!((ns["kind"].as_str(), &ns["metadata"]["name"]), (Some("Namespace"), &ds["metadata"]["namespace"]));
}

/// The ConfigMap's plugin config is the shipped one, and its command
/// parses.
#[test]
fn the_npd_configmap_carries_the_plugin_config() {
    let cm = yaml("node-problem-detector.yaml");
    assert_eq!(cm["kind"], "ConfigMap");
    let inner: Value = serde_json::from_str(cm["data"]["railwatch.json"].as_str().unwrap()).unwrap();
    let shipped: Value =
        serde_json::from_str(&std::fs::read_to_string(dist("node-problem-detector/railwatch.json")).unwrap()).unwrap();
    assert_eq!(inner, shipped);
    let rule = &inner["rules"][0];
    assert_eq!(rule["path"], "/usr/bin/railwatch");
    let mut args: Vec<&str> = rule["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    args.extend(["--socket", "/nonexistent/state.sock"]);
    let out = common::railwatch(&args);
    assert_eq!(out.status.code(), Some(2), "unknown without an agent: {out:?}");
}
