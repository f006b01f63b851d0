"""Task JSONs used by the tests (the schema of PROTOCOL.md)."""

import copy


def with_defaults(task):
    """A copy of `task` with every absent defaulted attribute filled in from the op schema, as
    the Rust client sends it (tgc_tvm::task_json, Op::with_defaults): the worker fills in
    nothing itself."""
    from tgc_worker.ops import OPS

    task = copy.deepcopy(task)
    for b in task["bindings"]:
        spec = OPS.get(b.get("op"))
        if spec is None:
            continue
        attrs = b.get("attrs") or {}
        for a in spec.attrs.values():
            if a.presence == "defaulted" and a.name not in attrs:
                attrs[a.name] = copy.deepcopy(a.default)
        if attrs:
            b["attrs"] = attrs
    return task


def T(shape, dtype="float32"):
    return {"shape": list(shape), "dtype": dtype}


def conv_task(name, hw=16, c=8, tail="add_relu"):
    """conv2d 3x3 pad 1 (NCHW) followed by `tail`: add_relu | relu | none."""
    params = [dict(name="x", **T([1, c, hw, hw])), dict(name="w", **T([c, c, 3, 3]))]
    out = T([1, c, hw, hw])
    b = [
        {
            "op": "nn.conv2d",
            "operands": [0, 1],
            "attrs": {"strides": [1, 1], "padding": [1, 1, 1, 1]},
            "results": [out],
        }
    ]
    if tail == "add_relu":
        params.append(dict(name="r", **out))
        b.append({"op": "add", "operands": [3, 2], "results": [out]})
        b.append({"op": "nn.relu", "operands": [4], "results": [out]})
        res = [5]
    elif tail == "relu":
        b.append({"op": "nn.relu", "operands": [2], "results": [out]})
        res = [3]
    else:
        res = [2]
    return with_defaults({"name": name, "params": params, "bindings": b, "results": res})


def matmul_task(name, m=16, k=32, n=16):
    return {
        "name": name,
        "params": [dict(name="a", **T([m, k])), dict(name="b", **T([k, n]))],
        "bindings": [{"op": "matmul", "operands": [0, 1], "results": [T([m, n])]}],
        "results": [2],
    }


LLVM = {"kind": "llvm", "num-cores": 2}
CUDA = {"kind": "cuda", "arch": "sm_90"}
