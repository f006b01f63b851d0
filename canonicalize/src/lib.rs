//! tgc-canonicalize: the canonical form of a task function and its three keys (exact,
//! structural, family), plus similarity features.
//!
//! Keys are invariant under renaming of values, parameters and functions, the order of
//! independent bindings, the order of parameters and the operand order of commutative ops;
//! they change with any change of op, attribute, dtype or dataflow (structural and exact),
//! and of shape (exact). See [`canon`] for how. [`similarity`] measures how much of the tuning
//! work repeats within and across models at each level.

pub mod canon;
pub mod features;
pub mod keys;
pub mod level;
pub mod similarity;
pub mod tasks;
pub mod tier;

pub use features::Features;
pub use keys::{
    key, TaskKey, TaskKeys, EXACT_KEY_ATTR, FAMILY_KEY_ATTR, KEY_PREFIX, STRUCTURAL_KEY_ATTR,
};
pub use level::Level;
pub use tasks::{extract_annotated_tasks, extract_tasks, Task};
pub use tier::Tier;
