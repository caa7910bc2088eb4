//! The scenarios shipped inside the binary.

/// One built-in scenario: its name and TOML text.
pub struct Builtin {
    /// Name used with `--builtin`.
    pub name: &'static str,
    /// The scenario file.
    pub text: &'static str,
}

macro_rules! builtins {
    ($($name:literal),* $(,)?) => {
        /// Every built-in, the default first.
        pub const BUILTINS: &[Builtin] = &[
            $(Builtin { name: $name, text: include_str!(concat!("../scenarios/", $name, ".toml")) },)*
        ];
    };
}

builtins!(
    "burst-hides-port-active",
    "missed-port-active",
    "port-settles",
    "dual-port-flap",
    "link-downgrade",
    "eintr-storm",
    "eio-fallback",
    "device-removal",
    "unknown-event-code",
    "busy-host",
    "flap-damping",
    "settle-delay",
    "softroce-hotplug",
    "data-path-breaker",
    "one-peer-failing",
    "silent-flap",
    "missing-address",
    "port-always-active",
);

/// The scenario `simulate` runs without a file.
pub const DEFAULT: &str = "burst-hides-port-active";

/// The built-in called `name`.
pub fn find(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}
