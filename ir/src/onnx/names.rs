//! ONNX value names to IR value names.
//!
//! The text format allows `[A-Za-z0-9_.]` in names. Exporters use `/` for scopes and `:0` for
//! output indices (`resnet50_1/conv1_relu_1/Relu:0`), PyTorch uses `::` and `/`
//! (`onnx::Conv_12`, `/layer1/conv/Conv_output_0`). We keep the name recognisable: scope
//! separators become `.`, a trailing `:0` is dropped, every other character outside the
//! allowed set becomes `_`, and runs of `_` that we introduced are collapsed. Uniqueness is the
//! function's business: [`crate::Function::new_value`] appends `_1`, `_2`, ... to a taken name.

/// The IR spelling of an ONNX name; `None` when nothing usable is left (an empty name).
pub(crate) fn sanitize(name: &str) -> Option<String> {
    const MAX_LEN: usize = 120;
    let trimmed = name.strip_suffix(":0").unwrap_or(name);
    let mut out = String::with_capacity(trimmed.len());
    let mut last_was_replacement = false;
    for c in trimmed.chars() {
        let mapped = match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '.' => {
                last_was_replacement = false;
                c
            }
            '/' => {
                last_was_replacement = false;
                '.'
            }
            _ if last_was_replacement => continue,
            _ => {
                last_was_replacement = true;
                '_'
            }
        };
        out.push(mapped);
        if out.len() >= MAX_LEN {
            break;
        }
    }
    let out = out.trim_matches('.').to_string();
    if out.is_empty() || out.chars().all(|c| c == '_') {
        None
    } else {
        Some(out)
    }
}

/// A module name from a file name: its stem, sanitized.
pub(crate) fn module_name(file: &str) -> String {
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    let stem = base.strip_suffix(".onnx").unwrap_or(base);
    sanitize(&stem.replace('.', "_")).unwrap_or_else(|| "model".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_exporter_names_recognisable() {
        assert_eq!(
            sanitize("resnet50_1/conv1_relu_1/Relu:0").as_deref(),
            Some("resnet50_1.conv1_relu_1.Relu")
        );
        assert_eq!(sanitize("onnx::Conv_12").as_deref(), Some("onnx_Conv_12"));
        assert_eq!(
            sanitize("/layer1/conv/Conv_output_0").as_deref(),
            Some("layer1.conv.Conv_output_0")
        );
        assert_eq!(sanitize("x:1").as_deref(), Some("x_1"));
        assert_eq!(sanitize("input").as_deref(), Some("input"));
        assert_eq!(sanitize("1234").as_deref(), Some("1234"));
    }

    #[test]
    fn empty_or_unusable_names_have_none() {
        assert_eq!(sanitize(""), None);
        assert_eq!(sanitize("::"), None);
        assert_eq!(sanitize("/"), None);
        assert_eq!(sanitize("é"), None);
    }

    #[test]
    fn long_names_are_cut() {
        let long = "a".repeat(1000);
        assert_eq!(sanitize(&long).unwrap().len(), 120);
    }

    #[test]
    fn module_names_come_from_the_file_stem() {
        assert_eq!(module_name("models/keras-resnet50.onnx"), "keras_resnet50");
        assert_eq!(module_name("a.b.onnx"), "a_b");
        assert_eq!(module_name(""), "model");
    }
}
