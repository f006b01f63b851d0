//! `canonicalize`: computes the three keys and the similarity features of every task
//! (`Primitive` function) and stores them as function attributes:
//! `tgc.exact_key`, `tgc.structural_key`, `tgc.family_key` (each `tgc2:<hex>`) and
//! `tgc.features` (`{flops, bytes, log2_extents}`). Running it twice gives the same result.

use crate::pass::{Pass, PassError, PassInfo, PassOptions};
use tgc_canonicalize::{Features, TaskKeys};
use tgc_ir::{Attr, Module};

pub use tgc_canonicalize::{EXACT_KEY_ATTR, FAMILY_KEY_ATTR, STRUCTURAL_KEY_ATTR};
pub const FEATURES_ATTR: &str = "tgc.features";

pub static INFO: PassInfo = PassInfo {
    name: "canonicalize",
    summary: "Attach exact, structural and family keys and similarity features to every task",
    options: &[],
    create: |_: &PassOptions| Ok(Box::new(Canonicalize)),
};

pub struct Canonicalize;

impl Pass for Canonicalize {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        for f in module.functions.values_mut().filter(|f| f.is_primitive()) {
            let keys = TaskKeys::of(f);
            let features = Features::of(f);
            f.attrs
                .insert(EXACT_KEY_ATTR.into(), Attr::Str(keys.exact.to_string()));
            f.attrs.insert(
                STRUCTURAL_KEY_ATTR.into(),
                Attr::Str(keys.structural.to_string()),
            );
            f.attrs
                .insert(FAMILY_KEY_ATTR.into(), Attr::Str(keys.family.to_string()));
            f.attrs.insert(FEATURES_ATTR.into(), features.to_attr());
        }
        Ok(())
    }
}
