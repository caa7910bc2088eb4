//! Markdown tables read strictly: a table is found by the line before it
//! that starts with an anchor and by its header row, or the test fails
//! naming both; a name is a `backticked` word in a cell.

use std::collections::BTreeSet;
use std::path::Path;

/// One doc, read whole.
pub struct Doc {
    file: String,
    text: String,
}

/// One table's rows, split into cells.
pub struct Table<'a> {
    file: &'a str,
    name: String,
    rows: Vec<Vec<String>>,
}

/// A cell's text, with where it came from.
pub struct Text {
    place: String,
    text: String,
}

impl Text {
    /// The cell's first word is `word` (`gauge (OpenMetrics: info)`).
    pub fn starts_with_word(&self, word: &str) {
        let first = self.text.split_whitespace().next().unwrap_or_default();
        assert_eq!(first, word, "{} says {:?}, the code {word:?}", self.place, self.text);
    }
}

/// Names a doc table gives, with where they came from.
pub struct Names {
    place: String,
    names: Vec<String>,
}

impl Doc {
    /// `file`, relative to the workspace `root`.
    pub fn read(root: &Path, file: &str) -> Doc {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        Doc { file: file.to_owned(), text }
    }

    /// The first backticked word of every heading `level` (`"## "`) gives,
    /// between the lines that start with `from` and with `to`.
    pub fn headings(&self, level: &str, from: &str, to: &str) -> Names {
        let mut lines = self.text.lines().skip_while(|l| !l.starts_with(from));
        assert!(lines.next().is_some(), "{}: no line starts with \"{from}\"", self.file);
        let section: Vec<&str> = lines.take_while(|l| !l.starts_with(to)).collect();
        let names = section.iter().filter_map(|l| ticks(l.strip_prefix(level)?).into_iter().next());
        let place = format!("{}: the \"{level}\" headings after \"{from}\" up to \"{to}\"", self.file);
        Names { place, names: names.collect() }
    }

    /// The first table whose header row starts with `header`, after the
    /// first line that starts with `anchor`.
    pub fn table(&self, anchor: &str, header: &str) -> Table<'_> {
        let name = format!("the table \"{header}\" after \"{anchor}\"");
        let mut lines = self.text.lines().skip_while(|l| !l.starts_with(anchor));
        assert!(lines.next().is_some(), "{}: no line starts with \"{anchor}\"", self.file);
        let mut lines = lines.skip_while(|l| !l.starts_with(header));
        assert!(lines.next().is_some(), "{}: no {name}", self.file);
        assert!(lines.next().is_some_and(|l| l.starts_with("|--")), "{}: {name} has no separator row", self.file);
        let rows: Vec<Vec<String>> = lines.take_while(|l| l.starts_with('|')).map(cells).collect();
        assert!(!rows.is_empty(), "{}: {name} has no rows", self.file);
        Table { file: &self.file, name, rows }
    }
}

/// A row's cells, split at every `|` not escaped as `\|`.
fn cells(line: &str) -> Vec<String> {
    let (mut out, mut cell, mut escaped) = (Vec::new(), String::new(), false);
    for c in line.trim().trim_start_matches('|').chars() {
        match c {
            '|' if !escaped => out.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
        escaped = c == '\\';
    }
    out
}

/// The `backticked` words of `text`, in order.
fn ticks(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The `backticked` words of `text`.
pub fn ticked(text: &str) -> BTreeSet<String> {
    ticks(text).into_iter().collect()
}

/// Every `rw_*` and `RW_*` name in `text` (a name ending in `_` is a
/// prefix, as in `rw_sim_*`).
pub fn c_names(text: &str) -> BTreeSet<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.split(|c: char| !word(c)).filter(|w| w.starts_with("rw_") || w.starts_with("RW_")).map(str::to_owned).collect()
}

impl Table<'_> {
    fn names(&self, what: &str, names: Vec<String>) -> Names {
        Names { place: format!("{}: {}, {what}", self.file, self.name), names }
    }

    /// A row's key: the first backticked word of its first cell, or the
    /// cell's text.
    fn key(row: &[String]) -> String {
        let first = row.first().map_or("", String::as_str);
        ticks(first).into_iter().next().unwrap_or_else(|| first.to_owned())
    }

    /// Every row's key.
    pub fn first_column(&self) -> Names {
        self.names("its first column", self.rows.iter().map(|r| Self::key(r)).collect())
    }

    fn row(&self, key: &str) -> &[String] {
        let row = self.rows.iter().find(|r| Self::key(r) == key);
        row.unwrap_or_else(|| panic!("{}: {} has no row `{key}`", self.file, self.name))
    }

    fn column<'r>(&self, row: &'r [String], key: &str, column: usize) -> &'r str {
        let cell = row.get(column);
        cell.unwrap_or_else(|| panic!("{}: {}, row `{key}` has no column {column}", self.file, self.name))
    }

    /// The text of column `column` in the row of `key`.
    pub fn cell_text(&self, key: &str, column: usize) -> Text {
        let cell = self.column(self.row(key), key, column).to_owned();
        Text { place: format!("{}: {}, row `{key}` column {column}", self.file, self.name), text: cell }
    }

    /// The backticked words of column `column` in the row of `key`.
    pub fn cell(&self, key: &str, column: usize) -> Names {
        let cell = self.column(self.row(key), key, column);
        self.names(&format!("row `{key}`"), ticks(cell))
    }

    /// The backticked words after `marker` in column `column` of `key`'s row.
    pub fn cell_after(&self, key: &str, column: usize, marker: &str) -> Names {
        let cell = self.column(self.row(key), key, column);
        let (_, after) = cell
            .split_once(marker)
            .unwrap_or_else(|| panic!("{}: {}, row `{key}` does not say \"{marker}\"", self.file, self.name));
        self.names(&format!("row `{key}` after \"{marker}\""), ticks(after))
    }

    /// The backticked words before `marker` in column `column` of `key`'s row.
    pub fn cell_until(&self, key: &str, column: usize, marker: &str) -> Names {
        let cell = self.column(self.row(key), key, column);
        let before = cell.split(marker).next().unwrap_or_default();
        self.names(&format!("row `{key}` before \"{marker}\""), ticks(before))
    }

    /// The keys of the inline-table form `{ port, state, notify? }` in
    /// the type column (1) of `key`'s row.
    pub fn cell_form(&self, key: &str) -> Names {
        let cell = self.column(self.row(key), key, 1);
        let form = cell
            .split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .unwrap_or_else(|| panic!("{}: {}, row `{key}` gives no {{ ... }} form", self.file, self.name))
            .0;
        let keys = form.split(',').map(|k| k.trim().trim_end_matches('?').to_owned()).filter(|k| !k.is_empty());
        self.names(&format!("the form of row `{key}`"), keys.collect())
    }

    /// The reasons of the rows whose second column reads "paused: `reason`".
    pub fn paused_bands(&self) -> Names {
        let names = self.rows.iter().filter_map(|r| ticks(r.get(1)?.strip_prefix("paused: ")?).into_iter().next());
        self.names("its \"paused: \" rows", names.collect())
    }

    /// The backticked words of column `column` in every row.
    pub fn all_cells(&self, column: usize) -> Names {
        let names = self.rows.iter().flat_map(|r| r.get(column).map(|c| ticks(c)).unwrap_or_default()).collect();
        self.names(&format!("column {column}"), names)
    }
}

impl Names {
    /// These names and `other`'s, the same name once.
    pub fn and(self, other: Names) -> Names {
        let mut names = self.names;
        for name in other.names {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Names { place: format!("{} and {}", self.place, other.place), names }
    }

    /// Each name up to `end` (`add_device(name, now)` → `add_device`).
    pub fn before(self, end: char) -> Names {
        let names = self.names.iter().map(|n| n.split(end).next().unwrap_or_default().to_owned()).collect();
        Names { place: self.place, names }
    }

    /// The same names as the code's, both ways, each once.
    pub fn same_as(&self, code: &BTreeSet<String>) {
        let doc: BTreeSet<String> = self.names.iter().cloned().collect();
        assert_eq!(doc.len(), self.names.len(), "{} lists a name twice: {:?}", self.place, self.names);
        let lacks: Vec<_> = code.difference(&doc).collect();
        assert!(lacks.is_empty(), "{} lacks {lacks:?}, which the code has", self.place);
        let extra: Vec<_> = doc.difference(code).collect();
        assert!(extra.is_empty(), "{} lists {extra:?}, which the code does not have (it has {code:?})", self.place);
    }

    /// The same names as the code's, in the code's order.
    pub fn in_order(&self, code: &[String]) {
        self.same_as(&code.iter().cloned().collect());
        assert_eq!(self.names, code, "{}: not in the code's order", self.place);
    }
}
