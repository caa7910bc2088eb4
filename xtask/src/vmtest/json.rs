//! Reading the few JSON fields the host needs by string matching (xtask is
//! std-only): railwatch's JSON lines, cargo's build messages.

/// The raw value of `"key":` in a JSON object's text: a string without
/// its quotes (no escapes expected), an array or object with its
/// brackets, or the number / `true` / `false` / `null` token. The first occurrence: pass
/// a flat object (see [`object_with`]) when the key also appears nested.
pub fn raw<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":");
    let at = obj.find(&pat)? + pat.len();
    let rest = obj[at..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        return s.find('"').map(|end| &s[..end]);
    }
    if rest.starts_with(['[', '{']) {
        let mut depth = 0;
        for (i, c) in rest.char_indices() {
            match c {
                '[' | '{' => depth += 1,
                ']' | '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(&rest[..=i]);
                    }
                }
                _ => {}
            }
        }
        return None;
    }
    let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// `"key":` as a number.
pub fn num(obj: &str, key: &str) -> Option<f64> {
    raw(obj, key)?.parse().ok()
}

/// The innermost flat `{...}` of `line` that contains `needle`
/// (`"rail":"rxe0/1"` in a summary's `rails`).
pub fn object_with<'a>(line: &'a str, needle: &str) -> Option<&'a str> {
    let at = line.find(needle)?;
    let start = line[..at].rfind('{')?;
    let end = at + line[at..].find('}')?;
    Some(&line[start..=end])
}

/// Every `(key, value)` of `pairs` is in `obj` (values compared raw).
pub fn is(obj: &str, pairs: &[(&str, &str)]) -> bool {
    pairs.iter().all(|(k, v)| raw(obj, k) == Some(*v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_of_each_kind() {
        let line = r#"{"kind":"summary","n":3,"ok":true,"rails":[{"rail":"rxe0/1","state":"active"}],"x":null}"#;
        assert_eq!(raw(line, "kind"), Some("summary"));
        assert_eq!(num(line, "n"), Some(3.0));
        assert_eq!(raw(line, "ok"), Some("true"));
        assert_eq!(raw(line, "rails"), Some(r#"[{"rail":"rxe0/1","state":"active"}]"#));
        assert_eq!(raw(line, "x"), Some("null"));
        assert_eq!(raw(line, "missing"), None);
        let rail = object_with(line, "\"rail\":\"rxe0/1\"").unwrap();
        assert!(is(rail, &[("state", "active"), ("rail", "rxe0/1")]));
        assert!(!is(rail, &[("state", "paused")]));
    }
}
