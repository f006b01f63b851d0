//! The textual pipeline parser: `name{key=value key2=value2},name2`.

use std::fmt;

/// One pass of a pipeline as written: its name, options as text, and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineElement {
    pub name: String,
    pub options: Vec<(String, String)>,
    /// 1-based column of the name in the pipeline text.
    pub column: usize,
}

/// A pipeline that does not parse or names something unknown.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct PipelineParseError {
    /// 1-based column in the pipeline text.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for PipelineParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pipeline column {}: {}", self.column, self.message)
    }
}

struct Cursor<'a> {
    chars: Vec<char>,
    pos: usize,
    _src: &'a str,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }
    fn err(&self, message: impl Into<String>) -> PipelineParseError {
        PipelineParseError {
            column: self.pos + 1,
            message: message.into(),
        }
    }
    fn found(&self) -> String {
        match self.peek() {
            Some(c) => format!("'{c}'"),
            None => "end of pipeline".into(),
        }
    }
    fn ident(&mut self, what: &str) -> Result<String, PipelineParseError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.err(format!("expected {what}, found {}", self.found())));
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }
    /// A value: quoted, or raw up to whitespace or the closing brace (balanced braces allowed).
    fn value(&mut self) -> Result<String, PipelineParseError> {
        if let Some(q @ ('"' | '\'')) = self.peek() {
            let open = self.pos;
            self.pos += 1;
            let start = self.pos;
            while self.peek().is_some_and(|c| c != q) {
                self.pos += 1;
            }
            if self.peek().is_none() {
                return Err(PipelineParseError {
                    column: open + 1,
                    message: "unterminated quoted value".into(),
                });
            }
            let v = self.chars[start..self.pos].iter().collect();
            self.pos += 1;
            return Ok(v);
        }
        let start = self.pos;
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                c if c.is_whitespace() && depth == 0 => break,
                _ => {}
            }
            self.pos += 1;
        }
        if depth != 0 {
            return Err(self.err("unbalanced '{' in option value"));
        }
        Ok(self.chars[start..self.pos].iter().collect())
    }
}

/// Parses pipeline text into its elements. An empty (or all-blank) text is the empty pipeline.
pub fn parse_pipeline(text: &str) -> Result<Vec<PipelineElement>, PipelineParseError> {
    let mut c = Cursor {
        chars: text.chars().collect(),
        pos: 0,
        _src: text,
    };
    let mut out = Vec::new();
    c.skip_ws();
    if c.peek().is_none() {
        return Ok(out);
    }
    loop {
        c.skip_ws();
        let column = c.pos + 1;
        let name = c.ident("a pass name")?;
        let mut options = Vec::new();
        c.skip_ws();
        if c.peek() == Some('{') {
            c.pos += 1;
            loop {
                c.skip_ws();
                if c.peek() == Some('}') {
                    c.pos += 1;
                    break;
                }
                let key = c.ident("an option name or '}'")?;
                c.skip_ws();
                if c.peek() != Some('=') {
                    return Err(c.err(format!(
                        "expected '=' after option '{key}', found {}",
                        c.found()
                    )));
                }
                c.pos += 1;
                c.skip_ws();
                let value = c.value()?;
                options.push((key, value));
            }
        }
        out.push(PipelineElement {
            name,
            options,
            column,
        });
        c.skip_ws();
        match c.peek() {
            None => return Ok(out),
            Some(',') => c.pos += 1,
            Some(_) => {
                return Err(c.err(format!(
                    "expected ',' or end of pipeline, found {}",
                    c.found()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_options_and_quotes() {
        let p = parse_pipeline(" dce , partition{max-depth=8 name='a b'},x{t={\"k\": 1}}").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(
            p[0],
            PipelineElement {
                name: "dce".into(),
                options: vec![],
                column: 2
            }
        );
        assert_eq!(p[1].name, "partition");
        assert_eq!(
            p[1].options,
            vec![
                ("max-depth".into(), "8".into()),
                ("name".into(), "a b".into())
            ]
        );
        assert_eq!(p[2].options, vec![("t".into(), "{\"k\": 1}".into())]);
    }

    #[test]
    fn empty_pipeline_is_empty() {
        assert!(parse_pipeline("").unwrap().is_empty());
        assert!(parse_pipeline("   ").unwrap().is_empty());
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse_pipeline("dce,,cse").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pipeline column 5: expected a pass name, found ','"
        );
        let e = parse_pipeline("dce{x}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pipeline column 6: expected '=' after option 'x', found '}'"
        );
        let e = parse_pipeline("dce cse").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pipeline column 5: expected ',' or end of pipeline, found 'c'"
        );
        let e = parse_pipeline("dce{x='abc").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pipeline column 7: unterminated quoted value"
        );
        let e = parse_pipeline("dce{x=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pipeline column 8: expected an option name or '}', found end of pipeline"
        );
    }
}
