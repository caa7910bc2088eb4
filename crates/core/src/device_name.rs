//! What a kernel RDMA device's name can be, one rule for every input that
//! names a device (a scenario's `[[device]]`, `watch`'s include and
//! exclude lists).

/// Longest device name: the kernel's `IB_DEVICE_NAME_MAX` (64) less its NUL.
pub const MAX_DEVICE_NAME_BYTES: usize = 63;

/// Why `name` cannot be a device's name, if it cannot: the kernel's names
/// are 1 to [`MAX_DEVICE_NAME_BYTES`] bytes with no `/`, whitespace or
/// control character, and not `.` or `..` (a name is a directory of
/// sysfs: those two would name another).
///
/// ```
/// use railwatch_core::device_name_problem;
/// assert_eq!(device_name_problem("mlx5_0"), None);
/// assert_eq!(device_name_problem("a/b").as_deref(), Some("it contains '/'"));
/// assert!(device_name_problem("..").is_some());
/// ```
pub fn device_name_problem(name: &str) -> Option<String> {
    let odd = |c: char| format!("U+{:04X}", u32::from(c));
    if name.is_empty() {
        Some("it is empty".into())
    } else if name.len() > MAX_DEVICE_NAME_BYTES {
        Some(format!("{} bytes, at most {MAX_DEVICE_NAME_BYTES}", name.len()))
    } else if name == "." || name == ".." {
        Some("it is . or .., a directory of its own in sysfs".into())
    } else if name.contains('/') {
        Some("it contains '/'".into())
    } else if let Some(c) = name.chars().find(|c| c.is_whitespace()) {
        Some(format!("it contains whitespace ({})", odd(c)))
    } else {
        name.chars().find(|c| c.is_control()).map(|c| format!("it contains a control character ({})", odd(c)))
    }
}
