//! Task keys: blake3 digests of canonical encodings, printed `tgc2:<32 hex digits>`.

use crate::canon::{canonical_order, encode};
use crate::level::Level;
use std::fmt;
use std::str::FromStr;
use tgc_ir::Function;

/// The printed prefix; it versions the encoding. Change it whenever the encoding changes.
pub const KEY_PREFIX: &str = "tgc2:";

/// A 128-bit key of one level.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskKey(pub [u8; 16]);

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(KEY_PREFIX)?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for TaskKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let hex = s
            .strip_prefix(KEY_PREFIX)
            .ok_or_else(|| format!("key '{s}' does not start with '{KEY_PREFIX}'"))?;
        hex_bytes(hex)
            .map(TaskKey)
            .ok_or_else(|| format!("key '{s}' must have 32 hex digits after '{KEY_PREFIX}'"))
    }
}

/// `N` bytes from exactly `2 * N` hex digits (keys here, trace digests in the cache).
pub fn hex_bytes<const N: usize>(hex: &str) -> Option<[u8; N]> {
    if hex.len() != 2 * N || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl TaskKey {
    /// Whether `s` is a well-formed key of an older encoding (`tgc1:` ... before
    /// [`KEY_PREFIX`]). Caches keep such tasks: no tgc key of this version matches them, but
    /// their TVM workload hash still does.
    pub fn is_older_encoding(s: &str) -> bool {
        let current: u32 = KEY_PREFIX[3..KEY_PREFIX.len() - 1]
            .parse()
            .expect("KEY_PREFIX is tgc<N>:");
        let Some((version, hex)) = s.strip_prefix("tgc").and_then(|r| r.split_once(':')) else {
            return false;
        };
        version.parse::<u32>().is_ok_and(|v| v >= 1 && v < current)
            && hex.len() == 32
            && hex.bytes().all(|c| c.is_ascii_hexdigit())
    }
}

fn digest(bytes: &[u8]) -> TaskKey {
    let h = blake3::hash(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.as_bytes()[..16]);
    TaskKey(out)
}

/// The op names of `f` in canonical order, constants left out (the family encoding).
pub fn family_ops(f: &Function) -> Vec<&'static str> {
    let order = canonical_order(f, Level::Family);
    order
        .bindings
        .iter()
        .filter_map(|&bi| f.bindings[bi].callee.op())
        .map(|op| op.name())
        .filter(|n| *n != "constant")
        .collect()
}

/// The key of `f` at `level`.
pub fn key(f: &Function, level: Level) -> TaskKey {
    match level {
        Level::Family => {
            let mut bytes = level.tag().to_vec();
            for name in family_ops(f) {
                bytes.extend_from_slice(name.as_bytes());
                bytes.push(0);
            }
            digest(&bytes)
        }
        _ => digest(&encode(f, level)),
    }
}

/// The function attributes the `canonicalize` pass writes the keys into.
pub const EXACT_KEY_ATTR: &str = "tgc.exact_key";
pub const STRUCTURAL_KEY_ATTR: &str = "tgc.structural_key";
pub const FAMILY_KEY_ATTR: &str = "tgc.family_key";

/// The three keys of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskKeys {
    pub exact: TaskKey,
    pub structural: TaskKey,
    pub family: TaskKey,
}

impl TaskKeys {
    pub fn of(f: &Function) -> TaskKeys {
        TaskKeys {
            exact: key(f, Level::Exact),
            structural: key(f, Level::Structural),
            family: key(f, Level::Family),
        }
    }

    /// The keys the `canonicalize` pass attached to `f` (computed once per task there and
    /// read by every later pass), else, when `f` carries none of them, computed now. A key
    /// attribute that is present but not a key, or only some of the three, is an error.
    pub fn of_annotated(f: &Function) -> Result<TaskKeys, String> {
        let attrs = [EXACT_KEY_ATTR, STRUCTURAL_KEY_ATTR, FAMILY_KEY_ATTR].map(|a| f.attrs.get(a));
        if attrs.iter().all(Option::is_none) {
            return Ok(TaskKeys::of(f));
        }
        let [exact, structural, family] = [EXACT_KEY_ATTR, STRUCTURAL_KEY_ATTR, FAMILY_KEY_ATTR]
            .map(|name| {
                let a = f
                    .attrs
                    .get(name)
                    .ok_or_else(|| format!("@{}: has some key attributes but no {name}", f.name))?;
                a.as_str()
                    .ok_or_else(|| format!("@{}: {name} must be a string", f.name))?
                    .parse::<TaskKey>()
                    .map_err(|e| format!("@{}: {name}: {e}", f.name))
            });
        Ok(TaskKeys {
            exact: exact?,
            structural: structural?,
            family: family?,
        })
    }

    pub fn get(&self, level: Level) -> TaskKey {
        match level {
            Level::Exact => self.exact,
            Level::Structural => self.structural,
            Level::Family => self.family,
        }
    }
}
