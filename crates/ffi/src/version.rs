//! The library's version, as zlib and SQLite give theirs: the header says
//! what a program was compiled against (`RW_VERSION_MAJOR`, `_MINOR`,
//! `_PATCH`, and `RW_VERSION`, the string the header's trailer makes of
//! them), [`rw_version`] and [`rw_version_numbers`] what it runs with, so
//! a program can check at start-up that the two agree. Both come from the
//! crate's version: the header's numbers are checked against it when the
//! library builds, and the functions read it at build time.

use std::ffi::c_char;

use crate::args::put;
use crate::status::{guard, rw_status};

/// The header's major version: a library with another one is incompatible.
pub const RW_VERSION_MAJOR: u32 = 0;
/// The header's minor version: a library with a higher one adds to it.
pub const RW_VERSION_MINOR: u32 = 2;
/// The header's patch version.
pub const RW_VERSION_PATCH: u32 = 0;

/// The crate's version with a NUL, for C.
const VERSION_C: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// A decimal number at compile time (0 for anything but digits).
const fn decimal(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut n = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            return 0;
        }
        n = n * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    n
}

/// The crate's version as numbers.
const CRATE_VERSION: [u32; 3] = [
    decimal(env!("CARGO_PKG_VERSION_MAJOR")),
    decimal(env!("CARGO_PKG_VERSION_MINOR")),
    decimal(env!("CARGO_PKG_VERSION_PATCH")),
];

// The header's constants are the crate's version: a version bump that
// forgets them fails the build here (and the header test then shows the
// new header).
const _: () = {
    assert!(RW_VERSION_MAJOR == CRATE_VERSION[0], "RW_VERSION_MAJOR is not the crate's major version");
    assert!(RW_VERSION_MINOR == CRATE_VERSION[1], "RW_VERSION_MINOR is not the crate's minor version");
    assert!(RW_VERSION_PATCH == CRATE_VERSION[2], "RW_VERSION_PATCH is not the crate's patch version");
};

/// The library's version, `"MAJOR.MINOR.PATCH"` (`RW_VERSION` of the
/// header it was built with). A static string: never NULL, never freed.
#[unsafe(no_mangle)]
pub extern "C" fn rw_version() -> *const c_char {
    VERSION_C.as_ptr().cast()
}

/// The library's version as numbers, in `*major`, `*minor` and `*patch`.
/// `RW_ERR_NULL` if any of them is NULL (nothing is written then).
#[unsafe(no_mangle)]
pub extern "C" fn rw_version_numbers(major: *mut u32, minor: *mut u32, patch: *mut u32) -> rw_status {
    crate::status::quiet_panics();
    guard(|| {
        if major.is_null() || minor.is_null() || patch.is_null() {
            let which = if major.is_null() {
                "major"
            } else if minor.is_null() {
                "minor"
            } else {
                "patch"
            };
            return Err(crate::status::null(which));
        }
        // SAFETY: each is non-null, and the caller promises it is
        // writable.
        unsafe {
            put(major, CRATE_VERSION[0], "major")?;
            put(minor, CRATE_VERSION[1], "minor")?;
            put(patch, CRATE_VERSION[2], "patch")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn the_version_reads_the_same_as_text_and_numbers() {
        // SAFETY: rw_version returns a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr(rw_version()) }.to_str().unwrap();
        assert_eq!(text, env!("CARGO_PKG_VERSION"));
        let (mut a, mut b, mut c) = (u32::MAX, u32::MAX, u32::MAX);
        assert_eq!(rw_version_numbers(&mut a, &mut b, &mut c), rw_status::RW_OK);
        assert_eq!(format!("{a}.{b}.{c}"), text);
        assert_eq!((a, b, c), (RW_VERSION_MAJOR, RW_VERSION_MINOR, RW_VERSION_PATCH));
    }

    #[test]
    fn a_null_output_is_an_error_and_nothing_is_written() {
        let mut a = 7;
        assert_eq!(rw_version_numbers(&mut a, std::ptr::null_mut(), std::ptr::null_mut()), rw_status::RW_ERR_NULL);
        assert_eq!(a, 7);
        assert_eq!(crate::status::last_error_text(), "minor is NULL");
    }

    #[test]
    fn decimal_reads_digits_only() {
        assert_eq!((decimal("0"), decimal("12"), decimal("1x"), decimal("")), (0, 12, 0, 0));
    }
}
