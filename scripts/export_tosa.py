"""Lower an ONNX model to TOSA with torch-mlir, for tgc's MLIR frontend.

    python scripts/export_tosa.py MODEL.onnx OUT.mlir

torch-mlir's ONNX importer (`python -m torch_mlir.tools.import_onnx`) turns the model into
the `torch` dialect (its graph inputs, weights included, become the arguments of the one
function, in the model's order), and `torch-mlir-opt` lowers that to TOSA
(`--convert-torch-onnx-to-torch --torch-lower-to-backend-contract
--torch-backend-to-tosa-backend-pipeline`), printed in MLIR's generic form
(`--mlir-print-op-generic`): tgc reads TOSA as unregistered operations, so that the TOSA
version torch-mlir was built with need not match LLVM 22's.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile


def torch_mlir_opt() -> str:
    spec = importlib.util.find_spec("torch_mlir")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch_mlir is not installed (tvm/python/bootstrap.sh installs it)")
    for base in spec.submodule_search_locations:
        path = os.path.join(base, "_mlir_libs", "torch-mlir-opt")
        if os.access(path, os.X_OK):
            return path
    raise SystemExit("torch-mlir-opt not found in the torch_mlir package")


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().split("\n\n")[1])
    model, out = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        torch_ir = os.path.join(tmp, "model.torch.mlir")
        subprocess.run(
            [sys.executable, "-W", "ignore", "-m", "torch_mlir.tools.import_onnx", model,
             "-o", torch_ir],
            check=True,
        )
        staged = out + ".tmp"
        subprocess.run(
            [torch_mlir_opt(), "--convert-torch-onnx-to-torch",
             "--torch-lower-to-backend-contract", "--torch-backend-to-tosa-backend-pipeline",
             "--mlir-print-op-generic", torch_ir, "-o", staged],
            check=True,
        )
        os.replace(staged, out)
    print(f"{out}: TOSA of {model}", file=sys.stderr)


if __name__ == "__main__":
    main()
