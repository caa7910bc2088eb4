//! docs/STATE-MACHINE.md's table of completion statuses is the code's: every
//! status the machine classifies is a row there, with the same class.

use railwatch_core::{WC_STATUSES, WcClass};

#[test]
fn the_documented_table_is_the_codes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/STATE-MACHINE.md");
    let doc = std::fs::read_to_string(&path).expect("docs/STATE-MACHINE.md");
    for s in WC_STATUSES {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| {} | `IBV_WC_{}` |", s.code, s.name.to_uppercase())))
            .unwrap_or_else(|| panic!("no row for {} ({})", s.name, s.code));
        let class = match s.class {
            WcClass::Success => "success",
            WcClass::LocalPath => "local path",
            WcClass::PeerOrApp => "peer or application",
            WcClass::Consequence => "consequence",
            WcClass::Unknown => "nothing",
        };
        assert!(row.contains(&format!("| {class} |")), "{}: the row says {row}", s.name);
    }
}
