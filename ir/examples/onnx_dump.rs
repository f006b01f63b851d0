//! Prints the IR text of an ONNX model: `cargo run -p tgc-ir --example onnx_dump -- MODEL`.
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: onnx_dump MODEL.onnx");
        std::process::exit(1);
    };
    match tgc_ir::onnx::import_file(std::path::Path::new(&path), &[]) {
        Ok(m) => {
            print!("{}", tgc_ir::text::print_module(&m));
            eprintln!("{:?}", tgc_ir::onnx::op_histogram(&m));
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
