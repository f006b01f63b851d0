"""Export models to StableHLO with JAX, as a JAX or Keras 3 user would, for tgc's MLIR frontend.

    python scripts/export_stablehlo.py MODEL OUT.mlir [--npz OUT.npz] [--pretty]

MODEL is one of:
  resnet50, mobilenetv2   keras.applications models (weights=None: structure and Keras'
                          own random initialization, no download), 1x224x224x3 input
  block                   a Keras transformer block: multi-head attention (4 heads), residual,
                          layer norm, a GELU feed-forward of 512, 1x64x128 input
  convnet                 a plain JAX function: 3x3 convolution with bias, maximum(x, 0),
                          global sum, dense
  mlp                     a plain JAX function: two dense layers with bias and maximum(x, 0),
                          one function of the ops TVM 0.27's own StableHLO importer still reads
                          (the agreement test)

The model is lowered with `jax.jit(f).lower(...)`, weights as the leading arguments of
`@main` (as `model.stateless_call` takes them) and the image or sequence last, and printed in
MLIR's generic form (`print_generic_op_form=True`): StableHLO is not an upstream MLIR dialect,
so tgc (through MLIR's C API) reads it as unregistered ops. `--pretty` prints the custom form
instead (which tgc refuses with a one-line error).

`--npz` also writes the arguments (`arg0`, `arg1`, ... in `@main`'s order, with the
deterministic random values the model was built with) and JAX's own output on CPU (`out`),
for checking what tgc builds against the exporter's execution.
"""

import argparse
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def keras_model(name):
    import keras

    keras.utils.set_random_seed(0)
    if name == "resnet50":
        return keras.applications.ResNet50(weights=None), (1, 224, 224, 3)
    if name == "mobilenetv2":
        return keras.applications.MobileNetV2(weights=None), (1, 224, 224, 3)
    if name == "block":
        inp = keras.Input((64, 128))
        a = keras.layers.MultiHeadAttention(num_heads=4, key_dim=32)(inp, inp)
        x = keras.layers.LayerNormalization()(inp + a)
        f = keras.layers.Dense(512, activation="gelu")(x)
        f = keras.layers.Dense(128)(f)
        out = keras.layers.LayerNormalization()(x + f)
        return keras.Model(inp, out), (1, 64, 128)
    raise SystemExit(f"unknown model {name!r}")


def lowered_keras(name):
    model, shape = keras_model(name)
    weights = [v.value for v in model.trainable_variables] + [
        v.value for v in model.non_trainable_variables
    ]
    n_trainable = len(model.trainable_variables)

    def f(*args):
        *ws, x = args
        y, _ = model.stateless_call(ws[:n_trainable], ws[n_trainable:], x, training=False)
        return y

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    args = [np.asarray(w) for w in weights] + [x]
    return jax.jit(f), args


def lowered_convnet():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((32,)) * 0.1).astype(np.float32)
    d = (rng.standard_normal((32, 10)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, 32, 32, 16)).astype(np.float32)

    def f(w, b, d, x):
        y = jax.lax.conv_general_dilated(
            x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        y = jnp.maximum(y + b, 0.0)
        y = jnp.sum(y, axis=(1, 2))
        return y @ d

    return jax.jit(f), [w, b, d, x]


def lowered_mlp():
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal((128,)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 10)) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal((10,)) * 0.1).astype(np.float32)
    x = rng.standard_normal((4, 64)).astype(np.float32)

    def f(w1, b1, w2, b2, x):
        h = jnp.maximum(x @ w1 + b1, 0.0)
        return jnp.maximum(h @ w2 + b2, 0.0)

    return jax.jit(f), [w1, b1, w2, b2, x]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", choices=["resnet50", "mobilenetv2", "block", "convnet", "mlp"])
    p.add_argument("out")
    p.add_argument("--npz", help="also write the arguments and JAX's output here")
    p.add_argument("--pretty", action="store_true", help="StableHLO's custom form")
    a = p.parse_args()
    plain = {"convnet": lowered_convnet, "mlp": lowered_mlp}
    fn, args = plain[a.model]() if a.model in plain else lowered_keras(a.model)
    lowered = fn.lower(*args)
    text = lowered.compiler_ir("stablehlo").operation.get_asm(
        print_generic_op_form=not a.pretty
    )
    tmp = a.out + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, a.out)
    if a.npz:
        out = np.asarray(fn(*args))
        arrays = {f"arg{i}": np.asarray(v) for i, v in enumerate(args)}
        arrays["out"] = out
        np.savez(a.npz + ".tmp.npz", **arrays)
        os.replace(a.npz + ".tmp.npz", a.npz)
    print(f"{a.out}: {len(args)} arguments, {len(text)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
