//! The lexer of the text format: a pull lexer over the source bytes.
//!
//! Tokens are byte spans into the source; nothing is allocated per token. Strings are
//! validated here (escapes, termination) and unescaped on demand by [`unescape`], which
//! borrows when there is nothing to unescape. Line and column are not tracked while
//! lexing: an error carries a byte offset that is turned into `line:col` once, when the
//! error is reported.

use std::borrow::Cow;

/// An error at a byte offset of the source, before it gets its file, line and column.
#[derive(Debug)]
pub(super) struct Diag {
    pub pos: usize,
    pub message: String,
}

impl Diag {
    pub fn new(pos: usize, message: impl Into<String>) -> Self {
        Diag {
            pos,
            message: message.into(),
        }
    }
}

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// `[A-Za-z_][A-Za-z0-9_.]*`: keywords, op names, attribute keys, dtypes.
    Ident,
    /// Starts with a digit or `-digit`; runs over `[A-Za-z0-9_.]` (and a sign right after
    /// an exponent `e`), so `1.5e-3`, `12abc` and the tensor shape `1x3xf32` are one token.
    Num,
    /// `%name` or `%"quoted name"`.
    ValueName,
    /// `@name` or `@"quoted name"`.
    FuncName,
    /// `"..."`, escapes validated.
    Str,
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Lt,
    Gt,
    Comma,
    Colon,
    Equal,
    Arrow,
    /// A `-` not followed by a digit or `>` (as in `-inf`).
    Minus,
    Eof,
}

/// A token: its kind and its byte span in the source.
#[derive(Clone, Copy, Debug)]
pub(super) struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// Characters allowed in an unquoted `%value` or `@function` name.
pub(super) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

pub(super) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// A pull lexer: [`Lexer::next_token`] returns the next token or a lexical error.
pub(super) struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    pub fn new(src: &'a str) -> Self {
        Lexer {
            src,
            bytes: src.as_bytes(),
            pos: 0,
        }
    }

    fn peek_at(&self, i: usize) -> Option<u8> {
        self.bytes.get(i).copied()
    }

    /// Skips whitespace and `//` comments.
    fn skip_trivia(&mut self) {
        loop {
            match self.peek_at(self.pos) {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.peek_at(self.pos + 1) == Some(b'/') => {
                    match self.bytes[self.pos..].iter().position(|&b| b == b'\n') {
                        Some(n) => self.pos += n + 1,
                        None => self.pos = self.bytes.len(),
                    }
                }
                _ => return,
            }
        }
    }

    pub fn next_token(&mut self) -> Result<Token, Diag> {
        self.skip_trivia();
        let start = self.pos;
        let Some(b) = self.peek_at(start) else {
            return Ok(Token {
                kind: Kind::Eof,
                start,
                end: start,
            });
        };
        let single = |kind| (kind, 1);
        let (kind, len) = match b {
            b'(' => single(Kind::LParen),
            b')' => single(Kind::RParen),
            b'{' => single(Kind::LBrace),
            b'}' => single(Kind::RBrace),
            b'[' => single(Kind::LBracket),
            b']' => single(Kind::RBracket),
            b'<' => single(Kind::Lt),
            b'>' => single(Kind::Gt),
            b',' => single(Kind::Comma),
            b':' => single(Kind::Colon),
            b'=' => single(Kind::Equal),
            b'-' => match self.peek_at(start + 1) {
                Some(b'>') => (Kind::Arrow, 2),
                Some(b'0'..=b'9') => (Kind::Num, self.number_len(start)),
                _ => single(Kind::Minus),
            },
            b'0'..=b'9' => (Kind::Num, self.number_len(start)),
            b'%' => (Kind::ValueName, self.name_len(start, "value")?),
            b'@' => (Kind::FuncName, self.name_len(start, "function")?),
            b'"' => (Kind::Str, self.string_len(start)?),
            b if is_ident_start(b) => {
                let n = self.bytes[start + 1..]
                    .iter()
                    .take_while(|&&b| is_name_byte(b))
                    .count();
                (Kind::Ident, n + 1)
            }
            _ => {
                let c = self.src[start..].chars().next().unwrap_or('\u{fffd}');
                return Err(Diag::new(
                    start,
                    format!("unexpected character '{}'", c.escape_debug()),
                ));
            }
        };
        self.pos = start + len;
        Ok(Token {
            kind,
            start,
            end: self.pos,
        })
    }

    /// Length of a number-like token starting at `start` (which holds a digit or `-`).
    fn number_len(&self, start: usize) -> usize {
        let mut i = start + 1;
        while let Some(b) = self.peek_at(i) {
            let sign_after_exponent =
                (b == b'+' || b == b'-') && matches!(self.bytes[i - 1], b'e' | b'E');
            if is_name_byte(b) || sign_after_exponent {
                i += 1;
            } else {
                break;
            }
        }
        i - start
    }

    /// Length of `%name`, `@name`, `%"quoted"` or `@"quoted"` starting at `start`.
    fn name_len(&self, start: usize, what: &str) -> Result<usize, Diag> {
        match self.peek_at(start + 1) {
            Some(b'"') => Ok(1 + self.string_len(start + 1)?),
            _ => {
                let n = self.bytes[start + 1..]
                    .iter()
                    .take_while(|&&b| is_name_byte(b))
                    .count();
                if n == 0 {
                    let sigil = self.bytes[start] as char;
                    return Err(Diag::new(
                        start,
                        format!("expected {what} name after '{sigil}'"),
                    ));
                }
                Ok(n + 1)
            }
        }
    }

    /// Length of the string literal whose opening quote is at `start`, escapes checked.
    fn string_len(&self, start: usize) -> Result<usize, Diag> {
        let mut i = start + 1;
        loop {
            match self.peek_at(i) {
                None | Some(b'\n') => return Err(Diag::new(start, "unterminated string")),
                Some(b'"') => return Ok(i + 1 - start),
                Some(b'\\') => i = self.escape_end(start, i)?,
                Some(_) => i += 1,
            }
        }
    }

    /// Checks the escape whose backslash is at `i` and returns the offset just after it.
    fn escape_end(&self, string_start: usize, i: usize) -> Result<usize, Diag> {
        match self.peek_at(i + 1) {
            None | Some(b'\n') => Err(Diag::new(string_start, "unterminated string")),
            Some(b'"' | b'\\' | b'n' | b't' | b'r') => Ok(i + 2),
            Some(b'u') => {
                let bad = || {
                    Diag::new(
                        i,
                        "invalid unicode escape, expected '\\u{' 1 to 6 hex digits '}'",
                    )
                };
                if self.peek_at(i + 2) != Some(b'{') {
                    return Err(bad());
                }
                let digits_start = i + 3;
                let n = self.bytes[digits_start..]
                    .iter()
                    .take_while(|b| b.is_ascii_hexdigit())
                    .count();
                if n == 0 || n > 6 || self.peek_at(digits_start + n) != Some(b'}') {
                    return Err(bad());
                }
                let hex = &self.src[digits_start..digits_start + n];
                let code = u32::from_str_radix(hex, 16).map_err(|_| bad())?;
                if char::from_u32(code).is_none() {
                    return Err(Diag::new(
                        i,
                        format!("invalid unicode scalar value '\\u{{{hex}}}'"),
                    ));
                }
                Ok(digits_start + n + 1)
            }
            Some(_) => {
                let c = self.src[i + 1..].chars().next().unwrap_or('\u{fffd}');
                Err(Diag::new(
                    i,
                    format!("unknown escape sequence '\\{}'", c.escape_debug()),
                ))
            }
        }
    }
}

/// The value of a string literal's contents (between the quotes), already validated by the
/// lexer. Borrows when there is no escape.
pub(super) fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('u') => {
                let rest = chars.as_str();
                // Validated by the lexer: `{hex}` follows.
                let close = rest.find('}').unwrap_or(rest.len());
                let code = rest
                    .get(1..close)
                    .and_then(|h| u32::from_str_radix(h, 16).ok());
                out.push(code.and_then(char::from_u32).unwrap_or('\u{fffd}'));
                chars = rest.get(close + 1..).unwrap_or("").chars();
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Cow::Owned(out)
}
