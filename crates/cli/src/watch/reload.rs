//! SIGHUP: the settings re-read with the same code as at start, and what
//! changed applied where it can be while running (docs/CONFIG.md,
//! "Reloading"): the devices chosen and the metrics text file.

use std::path::Path;
use std::sync::PoisonError;

use railwatch_verbs_backend::list_devices;

use super::Watch;
use crate::WatchArgs;
use crate::config::{self, Settings};

/// Re-reads the settings (the file, then the flags over it). A bad file is
/// refused with the error logged; `None` then, and the running settings
/// stay. Otherwise the new settings and the changed keys that can be
/// applied now; the changed keys that cannot are logged as needing a
/// restart.
fn reread(args: &WatchArgs, running: &Settings, metrics_on: bool) -> Option<(Settings, Vec<&'static str>)> {
    let file = args.config.as_ref().map_or_else(|| "the flags (no --config)".to_owned(), |p| p.display().to_string());
    let new = match config::resolve(args) {
        Ok(s) => s,
        Err(e) => {
            log::error!("reload refused, the running settings are kept: {e}");
            return None;
        }
    };
    // As at start: settings that would watch none of the devices present
    // are refused.
    if let Ok(present) = list_devices() {
        if !present.is_empty() && !present.iter().any(|n| new.devices.watches(n)) {
            log::error!(
                "reload refused, the running settings are kept: {file}: include/exclude would watch none of the devices present ({})",
                present.join(", ")
            );
            return None;
        }
    }
    let changed = config::changed_keys(running, &new);
    let (mut now, mut later): (Vec<&'static str>, Vec<&'static str>) =
        changed.into_iter().partition(|k| config::RELOADABLE.contains(k));
    if !metrics_on && now.contains(&"metrics.textfile") {
        // No registry was made at start: one cannot be added now.
        now.retain(|k| *k != "metrics.textfile");
        later.push("metrics.textfile");
    }
    if !later.is_empty() {
        log::warn!(
            "reload of {file}: changed, but needing a restart to take effect (still running with the old values): {}",
            later.join(", ")
        );
    }
    Some((new, now))
}

/// A metrics text file no longer written (moved or turned off by a
/// reload) is removed: node_exporter would go on exporting its last values
/// beside the new file's. Only a regular file, and not the new path.
fn forget_textfile(old: Option<&Path>, new: Option<&Path>) {
    let Some(old) = old else { return };
    if new.is_some_and(|new| railwatch_cli::outfile::same_file(old, new)) {
        return;
    }
    if std::fs::symlink_metadata(old).is_ok_and(|m| m.is_file()) {
        match std::fs::remove_file(old) {
            Ok(()) => log::info!("removed the metrics text file no longer written, {}", old.display()),
            Err(e) => log::warn!("cannot remove the metrics text file no longer written, {}: {e}", old.display()),
        }
    }
}

impl Watch {
    /// SIGHUP: re-reads the settings and applies what changed and can be.
    pub(super) fn reload(&mut self) {
        self.outputs.notifier.send("RELOADING=1");
        if let Some((new, apply)) = reread(&self.args, &self.running, self.outputs.metrics.is_some()) {
            let mut applied = Vec::new();
            if apply.contains(&"include") || apply.contains(&"exclude") {
                applied.push(self.choose_devices(&new));
            }
            if apply.contains(&"metrics.textfile") {
                applied.extend(self.move_textfile(&new));
            }
            if applied.is_empty() {
                log::info!("reloaded the settings: nothing to apply");
            } else {
                log::info!("reloaded the settings: applied {}", applied.join("; "));
            }
        }
        self.outputs.notifier.send("READY=1");
    }

    /// Watches the devices `new` chooses: newly excluded ones removed now,
    /// newly included ones attached now (or when they appear). Says what
    /// it did.
    fn choose_devices(&mut self, new: &Settings) -> String {
        *self.filter.lock().unwrap_or_else(PoisonError::into_inner) = new.devices.clone();
        self.running.devices = new.devices.clone();
        let found = self.monitor.rescan();
        if let Some(m) = &mut self.outputs.metrics {
            // What the operator took out leaves the metrics (not a rail
            // down); what comes back returns.
            let rails = self.monitor.rails();
            for name in &found.removed {
                let of_it: Vec<_> =
                    rails.iter().map(|(id, _)| *id).filter(|id| self.names.device(id.device) == name).collect();
                m.registry.unwatch(name, &of_it);
            }
            m.registry.rewatch(|name| new.devices.watches(name));
        }
        let include = new.devices.include.as_ref();
        let mut what = format!(
            "include = {}, exclude = [{}]",
            include.map_or_else(|| "every device".to_owned(), |i| format!("[{}]", i.join(", "))),
            new.devices.exclude.join(", ")
        );
        if !found.removed.is_empty() {
            what.push_str(&format!(" (no longer watched: {})", found.removed.join(", ")));
        }
        if !found.added.is_empty() {
            what.push_str(&format!(" (attached: {})", found.added.join(", ")));
        }
        what
    }

    /// Writes the metrics text file where `new` says (or none), removing
    /// the old one. Says what it did, or `None` when it kept the old one
    /// (logged).
    fn move_textfile(&mut self, new: &Settings) -> Option<String> {
        let m = self.outputs.metrics.as_mut()?;
        let running = &mut self.running.metrics.textfile;
        let still = running.as_ref().map_or("none".into(), |p| p.display().to_string());
        match (&new.metrics.textfile, config::distinct_files(&self.args, new)) {
            (Some(_), Err(e)) => {
                log::error!("reload: {e}; still writing {still}");
                None
            }
            (Some(path), Ok(())) => match m.write_textfile(path) {
                Ok(()) => {
                    // The old writer stopped (its last write) before its file goes.
                    let old = running.replace(path.clone());
                    forget_textfile(old.as_deref(), Some(path));
                    Some(format!("metrics.textfile = {}", path.display()))
                }
                Err(e) => {
                    log::error!(
                        "reload: cannot write the metrics text file {} ({e}); still writing {still}",
                        path.display()
                    );
                    None
                }
            },
            (None, _) => {
                m.stop_textfile();
                forget_textfile(running.take().as_deref(), None);
                Some("metrics.textfile = none".to_owned())
            }
        }
    }
}
