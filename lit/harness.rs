//! The lit harness: runs every `*.tgc` file under `lit/` as a test.
//!
//! Each file carries `// RUN:` lines (a trailing `\` continues a line). In them `%tgc` is the
//! `tgc` binary under test and `%s` the file itself, `%t` a scratch path for it; `FileCheck` and `not` are LLVM's (from
//! Debian's llvm-19-tools, or the directory named by `$LLVM_TOOLS_DIR`). Each RUN line runs
//! under `bash -o pipefail` and must succeed.
//!
//! `%mlir-opt` is LLVM 22's `mlir-opt` (Debian's mlir-22-tools, or `$MLIR_TOOLS_DIR`). The
//! `*.mlir` files under `lit/mlir/` (inputs of the MLIR frontend) run when tgc is built with
//! the `mlir` feature.
//!
//! Every text-IR input outside `lit/errors/` must also round-trip: `tgc opt FILE` with an empty
//! pipeline prints exactly the file minus its `//` comment lines. Files under `lit/errors/`
//! are malformed on purpose and check the diagnostics instead.

use std::path::{Path, PathBuf};
use std::process::Command;

fn llvm_tools_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var("LLVM_TOOLS_DIR") {
        return Ok(PathBuf::from(dir));
    }
    for dir in [
        "/usr/lib/llvm-19/bin",
        "/usr/lib/llvm-18/bin",
        "/usr/lib/llvm-17/bin",
    ] {
        if Path::new(dir).join("FileCheck").is_file() {
            return Ok(PathBuf::from(dir));
        }
    }
    Err(
        "FileCheck not found: install Debian's llvm-19-tools (apt-get install llvm-19-tools) \
         or set LLVM_TOOLS_DIR to a directory holding FileCheck and not"
            .to_string(),
    )
}

/// The RUN lines of a lit file, with continuations joined.
fn run_lines(contents: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for line in contents.lines() {
        let Some(rest) = line.trim_start().strip_prefix("// RUN:") else {
            continue;
        };
        let rest = rest.trim();
        let (text, continues) = match rest.strip_suffix('\\') {
            Some(t) => (t.trim_end(), true),
            None => (rest, false),
        };
        let joined = match pending.take() {
            Some(p) => format!("{p} {text}"),
            None => text.to_string(),
        };
        if continues {
            pending = Some(joined);
        } else {
            out.push(joined);
        }
    }
    out.extend(pending);
    out
}

/// The file as `tgc opt` must print it: comment lines and surrounding blank lines removed.
fn expected_roundtrip(contents: &str) -> String {
    let kept: Vec<&str> = contents
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    let text = kept.join("\n");
    format!("{}\n", text.trim_matches('\n'))
}

fn run_file(path: &Path, contents: String) -> datatest_stable::Result<()> {
    let tgc = env!("CARGO_BIN_EXE_tgc");
    let tools = llvm_tools_dir()?;
    let abs = std::fs::canonicalize(path)?;
    let file = abs.to_string_lossy().to_string();
    let lines = run_lines(&contents);
    if lines.is_empty() {
        return Err(format!("{}: no '// RUN:' line", path.display()).into());
    }
    // `%t`: a scratch path private to this file.
    let tmp_dir = std::env::temp_dir().join(format!("tgc-lit-{}", std::process::id()));
    std::fs::create_dir_all(&tmp_dir)?;
    let stem = file.replace(['/', '.'], "_");
    let tmp = tmp_dir.join(stem).to_string_lossy().to_string();
    let search_path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for line in &lines {
        let cmd = line
            .replace("%mlir-opt", &mlir_opt())
            .replace("%tgc", tgc)
            .replace("%t", &tmp)
            .replace("%s", &file);
        let out = Command::new("bash")
            .args(["-o", "pipefail", "-c", &cmd])
            .env("PATH", &search_path)
            .current_dir(abs.parent().unwrap_or(Path::new(".")))
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "RUN line failed ({}):\n  {line}\n--- stdout ---\n{}--- stderr ---\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
    }
    let is_error_case = abs.components().any(|c| c.as_os_str() == "errors");
    let is_tgc_text = file.ends_with(".tgc");
    if is_tgc_text && !is_error_case {
        let out = Command::new(tgc).args(["opt", &file]).output()?;
        let printed = String::from_utf8_lossy(&out.stdout);
        let expected = expected_roundtrip(&contents);
        if !out.status.success() || printed != expected {
            return Err(format!(
                "{}: does not round-trip through 'tgc opt' with an empty pipeline\n--- expected ---\n{expected}--- printed ---\n{printed}--- stderr ---\n{}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
    }
    Ok(())
}

/// LLVM 22's `mlir-opt` (what the `mlir` feature builds against; Debian's mlir-22-tools), or
/// `$MLIR_TOOLS_DIR/mlir-opt`.
fn mlir_opt() -> String {
    let dir = std::env::var("MLIR_TOOLS_DIR").unwrap_or_else(|_| "/usr/lib/llvm-22/bin".into());
    format!("{dir}/mlir-opt")
}

#[cfg(not(feature = "mlir"))]
datatest_stable::harness! {
    { test = run_file, root = "../lit", pattern = r"\.tgc$" },
}

// The MLIR frontend's files (`lit/mlir/*.mlir`) need the feature.
#[cfg(feature = "mlir")]
datatest_stable::harness! {
    { test = run_file, root = "../lit", pattern = r"\.tgc$" },
    { test = run_file, root = "../lit/mlir", pattern = r"\.mlir$" },
}
