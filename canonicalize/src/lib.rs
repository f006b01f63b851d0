//! tgc-canonicalize: the canonical form of a task function and its three keys (exact,
//! structural, family), plus similarity features.
//!
//! Keys are invariant under renaming of values, parameters and functions, the order of
//! independent bindings, the order of parameters and the operand order of commutative ops;
//! they change with any change of op, attribute, dtype or dataflow (structural and exact),
//! and of shape (exact). See [`canon`] for how.

pub mod canon;
pub mod features;
pub mod keys;
pub mod level;
pub mod tasks;

pub use features::Features;
pub use keys::{key, TaskKey, TaskKeys, KEY_PREFIX};
pub use level::Level;
pub use tasks::{extract_tasks, Task};
