//! A lexer just good enough to measure rustfmt-formatted Rust: it finds the
//! lines that hold code (not comments, not blank) and the identifiers and
//! delimiters the measures need, never mistaking a brace in a string, a
//! char, a comment or a raw string for one in the code, nor a lifetime for
//! a char.

/// What a token is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An identifier or keyword (`r#ident` keeps its `r#`).
    Ident(String),
    /// One punctuation character: `{ } ( ) [ ] ; , # !` and the rest.
    Punct(char),
    /// A string, char or number literal, or a lifetime.
    Literal,
}

/// A token and the line it starts on (0-based).
#[derive(Clone, Debug)]
pub struct Token {
    /// The token.
    pub kind: Kind,
    /// Its line, 0-based.
    pub line: usize,
}

/// A file's tokens, and for each line whether it holds code.
pub struct Lexed {
    /// Every token outside comments.
    pub tokens: Vec<Token>,
    /// `code[line]`: the line has a token or part of a literal on it.
    pub code: Vec<bool>,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// The lexer's position in the text.
struct Lexer {
    chars: Vec<char>,
    at: usize,
    line: usize,
    out: Lexed,
}

/// Lexes `src`. Unterminated strings and comments run to the end of the
/// text; nothing here fails.
pub fn lex(src: &str) -> Lexed {
    let lines = src.lines().count() + 1;
    let mut lx = Lexer {
        chars: src.chars().collect(),
        at: 0,
        line: 0,
        out: Lexed { tokens: Vec::new(), code: vec![false; lines] },
    };
    while let Some(c) = lx.peek(0) {
        match c {
            '\n' => lx.newline(),
            c if c.is_whitespace() => lx.at += 1,
            '/' if lx.peek(1) == Some('/') => lx.line_comment(),
            '/' if lx.peek(1) == Some('*') => lx.block_comment(),
            '"' => {
                lx.at += 1;
                lx.literal(|lx| lx.string());
            }
            '\'' => lx.quote(),
            c if is_ident_start(c) => lx.ident(),
            c if c.is_ascii_digit() => {
                lx.literal(|lx| {
                    while lx.peek(0).is_some_and(is_ident_char) {
                        lx.at += 1;
                    }
                });
            }
            c => {
                lx.push(Kind::Punct(c));
                lx.at += 1;
            }
        }
    }
    lx.out
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn newline(&mut self) {
        self.line += 1;
        self.at += 1;
    }

    fn mark(&mut self) {
        if let Some(code) = self.out.code.get_mut(self.line) {
            *code = true;
        }
    }

    fn push(&mut self, kind: Kind) {
        self.mark();
        self.out.tokens.push(Token { kind, line: self.line });
    }

    /// A literal that `scan` reads to its end: one token on its first line,
    /// every line it covers with something on it marked as code.
    fn literal(&mut self, scan: impl FnOnce(&mut Lexer)) {
        self.push(Kind::Literal);
        scan(self);
    }

    fn line_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.at += 1;
        }
    }

    /// `/* ... */`, nested as Rust nests them.
    fn block_comment(&mut self) {
        self.at += 2;
        let mut depth = 1;
        while depth > 0 {
            match (self.peek(0), self.peek(1)) {
                (None, _) => return,
                (Some('/'), Some('*')) => {
                    depth += 1;
                    self.at += 2;
                }
                (Some('*'), Some('/')) => {
                    depth -= 1;
                    self.at += 2;
                }
                (Some('\n'), _) => self.newline(),
                _ => self.at += 1,
            }
        }
    }

    /// The body of a `"..."` string, after its opening quote.
    fn string(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.at += 1;
                    return;
                }
                '\\' => {
                    self.mark();
                    self.at += 1;
                    if self.peek(0) == Some('\n') {
                        self.newline();
                    } else {
                        self.at += 1;
                    }
                }
                '\n' => self.newline(),
                c => {
                    if !c.is_whitespace() {
                        self.mark();
                    }
                    self.at += 1;
                }
            }
        }
    }

    /// The body of a raw string after its `r`: `hashes` times `#`, the
    /// quote, the text, the quote and as many `#`.
    fn raw_string(&mut self, hashes: usize) {
        self.at += hashes + 1;
        while let Some(c) = self.peek(0) {
            if c == '"' && (1..=hashes).all(|k| self.peek(k) == Some('#')) {
                self.at += hashes + 1;
                return;
            }
            if c == '\n' {
                self.newline();
            } else {
                if !c.is_whitespace() {
                    self.mark();
                }
                self.at += 1;
            }
        }
    }

    /// A `'`: a char literal (`'x'`, `'\n'`, `'\u{7f}'`, `'\''`) or a
    /// lifetime or label (`'a`, `'static`, `'outer:`).
    fn quote(&mut self) {
        let escaped_end = (self.peek(1) == Some('\\')).then(|| (3..16).find(|&k| self.peek(k) == Some('\''))).flatten();
        let plain = self.peek(1).is_some_and(|c| c != '\n' && c != '\'') && self.peek(2) == Some('\'');
        self.push(Kind::Literal);
        match (escaped_end, plain) {
            (Some(end), _) => self.at += end + 1,
            (None, true) => self.at += 3,
            (None, false) => {
                // A lifetime: its name is not an identifier of the code.
                self.at += 1;
                while self.peek(0).is_some_and(is_ident_char) {
                    self.at += 1;
                }
            }
        }
    }

    /// An identifier, or the prefix of a byte, C or raw string (`b"`,
    /// `br#"`, `c"`, `r"`), or a raw identifier (`r#type`).
    fn ident(&mut self) {
        let start = self.at;
        while self.peek(0).is_some_and(is_ident_char) {
            self.at += 1;
        }
        let word: String = self.chars[start..self.at].iter().collect();
        let hashes = (0..).take_while(|&k| self.peek(k) == Some('#')).count();
        match word.as_str() {
            "r" | "br" | "cr" if self.peek(hashes) == Some('"') => self.literal(|lx| lx.raw_string(hashes)),
            "b" | "c" if self.peek(0) == Some('"') => {
                self.at += 1;
                self.literal(|lx| lx.string());
            }
            "r" if hashes == 1 && self.peek(1).is_some_and(is_ident_start) => {
                self.at += 1;
                let raw_start = self.at;
                while self.peek(0).is_some_and(is_ident_char) {
                    self.at += 1;
                }
                let name: String = self.chars[raw_start..self.at].iter().collect();
                self.push(Kind::Ident(format!("r#{name}")));
            }
            _ => self.push(Kind::Ident(word)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn puncts(src: &str) -> String {
        lex(src)
            .tokens
            .iter()
            .filter_map(|t| match t.kind {
                Kind::Punct(c) if "{}()[];".contains(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    fn idents(src: &str) -> Vec<String> {
        lex(src)
            .tokens
            .into_iter()
            .filter_map(|t| match t.kind {
                Kind::Ident(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn braces_in_strings_chars_and_comments_are_not_code() {
        assert_eq!(puncts(r#"let s = "{ \" }"; // { "#), ";");
        assert_eq!(puncts("let c = '{'; let d = '}'; let q = '\\''; let e = '\"';"), ";;;;");
        assert_eq!(puncts("/* { /* nested } */ still { comment */ {}"), "{}");
        assert_eq!(puncts("let u = '\\u{7b}'; let b = b'{';"), ";;");
        assert_eq!(puncts("f(\"a\\\\\", '}')"), "()");
    }

    #[test]
    fn raw_strings_end_at_their_own_hashes() {
        assert_eq!(puncts(r###"let s = r#"a "quoted" { brace"#; {}"###), ";{}");
        assert_eq!(puncts(r####"let s = br##"x"# } "##; let t = r"}";"####), ";;");
        assert_eq!(puncts(r##"let s = c"}"; let t = cr#"{"#;"##), ";;");
    }

    #[test]
    fn lifetimes_are_not_chars() {
        // A lifetime then a char with a brace: both recognised.
        assert_eq!(puncts("fn f<'a>(x: &'a str) -> char { '{' }"), "(){}");
        assert_eq!(puncts("'outer: loop { break 'outer; }"), "{;}");
        assert_eq!(puncts("impl<'a, 'b: 'a> X<'a> for Y<'b> {}"), "{}");
        assert_eq!(idents("fn f(x: &'static str) {}"), ["fn", "f", "x", "str"]);
    }

    #[test]
    fn raw_identifiers_are_not_keywords() {
        assert_eq!(idents("let r#fn = r#type;"), ["let", "r#fn", "r#type"]);
    }

    #[test]
    fn code_lines_leave_out_comments_and_blank_lines() {
        let src = "// a comment\n\nfn f() {\n    /* block\n       comment */\n    let s = \"\n\ntext\";\n}\n/// doc\n";
        let code: Vec<usize> = lex(src).code.iter().enumerate().filter(|(_, c)| **c).map(|(i, _)| i).collect();
        // fn line, `let s = "`, the string's text line, `}`.
        assert_eq!(code, [2, 5, 7, 8]);
    }

    #[test]
    fn unterminated_input_does_not_hang() {
        for src in ["\"abc", "r#\"abc", "/* abc", "'", "'\\", "b\"", "r#"] {
            let _ = lex(src);
        }
    }
}
