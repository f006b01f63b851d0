//! The one error type of the ONNX frontend. Its `Display` is always a single line that names
//! the file and the place in the model (a node with its op type, a graph input, a field), so
//! the CLI can print it as is.

use std::fmt;

/// An ONNX model could not be imported.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}: {place}{message}")]
pub struct ImportError {
    /// The file (or the name given to [`super::import_bytes`]).
    pub file: String,
    /// Where in the model the problem is, with a trailing `": "`, or empty for the whole file.
    pub place: String,
    /// What is wrong, one line.
    pub message: String,
}

/// An error before the file name is attached: where and what. Converters and the decoder
/// return this; the entry points add the file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Problem {
    pub place: Place,
    pub message: String,
}

/// Where a problem is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Place {
    /// The file as a whole (decoding, model-level fields).
    File,
    /// A node: its name (may be empty), its position in the graph and its op type.
    Node {
        name: String,
        index: usize,
        op_type: String,
    },
    /// A graph input.
    Input(String),
    /// A graph output.
    Output(String),
    /// An initializer.
    Initializer(String),
}

impl Problem {
    pub fn new(place: Place, message: impl Into<String>) -> Problem {
        Problem {
            place,
            message: message.into(),
        }
    }

    /// A problem that is not yet tied to a place; the caller sets one with [`Problem::at`].
    pub fn msg(message: impl Into<String>) -> Problem {
        Problem {
            place: Place::File,
            message: message.into(),
        }
    }

    /// Puts a placeless problem at `place`; a problem that already has a place keeps it.
    pub fn at(mut self, place: &Place) -> Problem {
        if self.place == Place::File {
            self.place = place.clone();
        }
        self
    }

    pub fn into_error(self, file: &str) -> ImportError {
        ImportError {
            file: one_line(file),
            place: self.place.to_string(),
            message: one_line(&self.message),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::File => Ok(()),
            Place::Node {
                name,
                index,
                op_type,
            } if name.is_empty() => {
                write!(f, "node #{index} ({}): ", one_line(op_type))
            }
            Place::Node { name, op_type, .. } => {
                write!(f, "node '{}' ({}): ", one_line(name), one_line(op_type))
            }
            Place::Input(n) => write!(f, "input '{}': ", one_line(n)),
            Place::Output(n) => write!(f, "output '{}': ", one_line(n)),
            Place::Initializer(n) => write!(f, "initializer '{}': ", one_line(n)),
        }
    }
}

/// Shortens a user-controlled string and escapes control characters so that a message stays
/// on one line and readable whatever the file contains.
pub(crate) fn one_line(s: &str) -> String {
    const MAX_CHARS: usize = 200;
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX_CHARS {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) type PResult<T> = Result<T, Problem>;

/// `Err(Problem::msg(format!(...)))`.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::onnx::error::Problem::msg(format!($($arg)*)))
    };
}
pub(crate) use bail;
