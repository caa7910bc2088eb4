//! Who owns a device's context (`device_owner`): railwatch, which may
//! close and re-open it, or the engine, whose context also holds memory
//! registrations its peers use, its CQs and its endpoints, and which
//! therefore cannot close it for railwatch.

/// Who owns a device's context (`device_owner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DeviceOwner {
    /// railwatch (the default): a device that is gone (DEVICE_FATAL, a
    /// hang-up, failed port queries) is closed ([`Action::Close`]) and
    /// re-opened with backoff ([`Action::Reopen`]).
    ///
    /// [`Action::Close`]: crate::Action::Close
    /// [`Action::Reopen`]: crate::Action::Reopen
    #[default]
    Railwatch,
    /// The engine: such a device is never closed while it is on the host;
    /// the engine stops using it (its rails are inert, its work lost) and is
    /// asked with backoff to re-validate it ([`Action::Revalidate`]): after
    /// DEVICE_FATAL by re-initialising its own context, otherwise by
    /// checking the context still answers. Only a device that left the host
    /// is closed.
    ///
    /// [`Action::Revalidate`]: crate::Action::Revalidate
    Engine,
}

impl DeviceOwner {
    /// Both, in the order of [`name`](Self::name)'s values.
    pub const ALL: [DeviceOwner; 2] = [DeviceOwner::Railwatch, DeviceOwner::Engine];

    /// The setting's value (`"railwatch"`).
    pub const fn name(self) -> &'static str {
        match self {
            DeviceOwner::Railwatch => "railwatch",
            DeviceOwner::Engine => "engine",
        }
    }
}
