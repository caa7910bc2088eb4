//! Import circles between a crate's modules: module `a` naming something
//! of `b` (`use crate::b::X`, `super::b::f()`) while `b`, directly or
//! through others, names something of `a`. A module and its own
//! submodules are one concept and may name each other; siblings may not
//! go round in a circle.
//!
//! The paths come from `measure` (test code aside); a path is resolved to
//! the longest module it names that is a file of the crate (an item's name
//! after it is dropped), so `crate::machine::Machine` is an edge to
//! `machine`.

use std::collections::BTreeMap;

/// A module's path in its crate: `["machine", "evidence"]`, `[]` for the
/// crate root.
pub type ModulePath = Vec<String>;

/// The module a source file is, from its path in the workspace
/// (`crates/core/src/machine/mod.rs` → `machine`).
pub fn module_of(path: &str) -> ModulePath {
    let in_src = path.split_once("/src/").map_or(path, |(_, rest)| rest);
    let mut parts: Vec<String> = in_src.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

/// What `path` (as written in module `from`) resolves to among `known`,
/// when it names another module.
fn resolve(from: &[String], path: &[String], known: &BTreeMap<ModulePath, Vec<ModulePath>>) -> Option<ModulePath> {
    let mut base: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => from.to_vec(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        base.pop();
        while rest.first().is_some_and(|p| p == "super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().cloned());
    (0..=base.len()).rev().map(|n| base[..n].to_vec()).find(|m| known.contains_key(m))
}

fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Every circle among `modules` (each module with the paths it names), as
/// the modules in it joined by ` → `, sorted.
pub fn circles(modules: &BTreeMap<ModulePath, Vec<Vec<String>>>) -> Vec<String> {
    let mut edges: BTreeMap<ModulePath, Vec<ModulePath>> = modules.keys().map(|m| (m.clone(), Vec::new())).collect();
    let known = edges.clone();
    for (from, paths) in modules {
        let mut to: Vec<ModulePath> =
            paths.iter().filter_map(|p| resolve(from, p, &known)).filter(|target| !related(from, target)).collect();
        to.sort();
        to.dedup();
        edges.insert(from.clone(), to);
    }
    let mut found: Vec<String> = components(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.iter().map(|m| if m.is_empty() { "(root)".into() } else { m.join("::") }).collect::<Vec<_>>())
        .map(|names| names.join(" → "))
        .collect();
    found.sort();
    found
}

/// The strongly connected components of `edges` (Tarjan's algorithm,
/// iterative), each sorted.
fn components(edges: &BTreeMap<ModulePath, Vec<ModulePath>>) -> Vec<Vec<ModulePath>> {
    let nodes: Vec<&ModulePath> = edges.keys().collect();
    let index_of: BTreeMap<&ModulePath, usize> = nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let succ: Vec<Vec<usize>> = nodes.iter().map(|m| edges[*m].iter().map(|t| index_of[t]).collect()).collect();
    let n = nodes.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut child)) = work.last_mut() {
            if *child == 0 && index[v] == usize::MAX {
                (index[v], low[v], next) = (next, next, next + 1);
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = succ[v].get(*child) {
                *child += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                component.sort();
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Vec<String> {
        s.split("::").map(str::to_string).collect()
    }

    fn modules(list: &[(&str, &[&str])]) -> BTreeMap<ModulePath, Vec<Vec<String>>> {
        list.iter().map(|(m, paths)| (module_of(m), paths.iter().map(|p| path(p)).collect())).collect()
    }

    #[test]
    fn a_file_is_the_module_its_path_names() {
        assert_eq!(module_of("crates/core/src/lib.rs"), Vec::<String>::new());
        assert_eq!(module_of("crates/core/src/machine/mod.rs"), ["machine"]);
        assert_eq!(module_of("crates/core/src/machine/evidence.rs"), ["machine", "evidence"]);
        assert_eq!(module_of("xtask/src/size/circles.rs"), ["size", "circles"]);
    }

    #[test]
    fn siblings_naming_each_other_are_a_circle() {
        let m = modules(&[
            ("crates/c/src/lib.rs", &[]),
            ("crates/c/src/damping.rs", &["crate::machine::MAX_DELAY_MS"]),
            ("crates/c/src/machine/mod.rs", &["crate::damping::Damping"]),
            ("crates/c/src/time.rs", &[]),
        ]);
        assert_eq!(circles(&m), ["damping → machine"]);
    }

    #[test]
    fn a_circle_through_super_and_three_modules_is_found() {
        let m = modules(&[
            ("crates/c/src/lib.rs", &[]),
            ("crates/c/src/a/mod.rs", &[]),
            ("crates/c/src/a/x.rs", &["super::y::f"]),
            ("crates/c/src/a/y.rs", &["crate::b::G"]),
            ("crates/c/src/b.rs", &["crate::a::x::H"]),
        ]);
        assert_eq!(circles(&m), ["a::x → a::y → b"]);
    }

    #[test]
    fn a_module_and_its_submodules_may_name_each_other() {
        let m = modules(&[
            ("crates/c/src/lib.rs", &["crate::machine::Machine"]),
            ("crates/c/src/machine/mod.rs", &["crate::machine::policy::f"]),
            ("crates/c/src/machine/policy.rs", &["super::Machine", "super::super::time::Millis"]),
            ("crates/c/src/time.rs", &[]),
        ]);
        assert!(circles(&m).is_empty());
    }
}
