#!/usr/bin/env python3
"""Semantically identical re-exports of ONNX models, for testing order and name invariance.

Each re-export computes exactly what its input computes, but looks like another exporter
wrote it:
  - the nodes are in a random topological order (Kahn's algorithm, picking a uniformly random
    node among the ready ones at each step);
  - every value (graph inputs, outputs, initializers, intermediate values, value_info) and
    every node gets a fresh name that no name of the input uses;
  - the two inputs of each commutative binary op (Add, Mul, Max, Min, Sum, Equal, And, Or,
    Xor with exactly two inputs, default domain) are swapped with probability 1/2;
  - the graph inputs, the initializers and the value_info entries are shuffled (graph
    outputs keep their order: it is the model's interface).
Attributes, types, shapes, initializer data, opsets and metadata are left as they are.
Both the input and the result go through onnx.checker.check_model (full check, with
strict shape inference), and the result is checked to be the input's graph up to the
renaming, the order and the swaps before it is written.

Usage:
  reexport_onnx.py IN.onnx OUT.onnx [IN2.onnx OUT2.onnx ...] [--seed N]
  reexport_onnx.py IN.onnx [IN2.onnx ...] --out-dir DIR [--seed N ...]
With --out-dir each input is written once per seed as DIR/<stem>.seed<N>.onnx. --report
prints one JSON line per written file (what changed, measured on the file read back).
Errors are one line naming the file, on stderr, with exit status 1. Nodes with subgraphs
(If, Loop, Scan) are refused. Needs the `onnx` package (the pinned TVM venv has it).
"""

import argparse
import json
import os
import random
import sys

COMMUTATIVE = {"Add", "Mul", "Max", "Min", "Sum", "Equal", "And", "Or", "Xor"}


class ReexportError(Exception):
    """A problem with one file; str() is the one-line message (file first)."""


def one_line(text):
    return " ".join(str(text).split())


def fail(path, message):
    raise ReexportError(f"{path}: {one_line(message)}")


def value_names(graph):
    """Every non-empty value name the graph mentions (an empty node input is an omitted
    optional input and stays empty)."""
    names = set()
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        names.add(vi.name)
    for t in graph.initializer:
        names.add(t.name)
    for st in graph.sparse_initializer:
        names.add(st.values.name)
        if st.indices.name:
            names.add(st.indices.name)
    for ann in graph.quantization_annotation:
        names.add(ann.tensor_name)
        for kv in ann.quant_parameter_tensor_names:
            names.add(kv.value)
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
    names.discard("")
    return names


def fresh_prefix(taken, seed):
    """A prefix such that no name in `taken` starts with it, so every fresh name is new."""
    prefix = f"r{seed}_"
    while any(n.startswith(prefix) for n in taken):
        prefix = "_" + prefix
    return prefix


def fresh_names(names, prefix, rng):
    """Maps each name to prefix + a number, the numbers assigned in random order."""
    names = sorted(names)
    numbers = list(range(len(names)))
    rng.shuffle(numbers)
    return {n: f"{prefix}{k}" for n, k in zip(names, numbers)}


def random_topological_order(path, graph, rng):
    """Node indices in a random topological order, and how many steps had a choice."""
    producer = {}
    for i, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                fail(path, f"value '{out}' is produced by two nodes")
            producer[out] = i
    users = [[] for _ in graph.node]
    pending = [0] * len(graph.node)
    for i, node in enumerate(graph.node):
        deps = {producer[x] for x in node.input if x in producer}
        if i in deps:
            fail(path, f"node '{node.name}' ({node.op_type}) uses its own output")
        pending[i] = len(deps)
        for d in deps:
            users[d].append(i)
    ready = [i for i, p in enumerate(pending) if p == 0]
    order, choices = [], 0
    while ready:
        if len(ready) > 1:
            choices += 1
        k = rng.randrange(len(ready))
        ready[k], ready[-1] = ready[-1], ready[k]
        i = ready.pop()
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if len(order) != len(graph.node):
        fail(path, "the graph has a cycle")
    return order, choices


def node_signature(node, rename=lambda n: n, unswap=False):
    """What a node computes, in comparable form: op, domain, inputs, outputs, attributes."""
    inputs = [rename(x) if x else "" for x in node.input]
    if unswap:
        inputs.reverse()
    outputs = [rename(x) if x else "" for x in node.output]
    attrs = tuple(a.SerializeToString(deterministic=True) for a in node.attribute)
    return (node.op_type, node.domain, tuple(inputs), tuple(outputs), attrs)


def reexport(path, model, seed):
    """The re-exported model and a dict of what was changed."""
    import onnx

    graph = model.graph
    for node in graph.node:
        for a in node.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                fail(
                    path,
                    f"node '{node.name}' ({node.op_type}) has a subgraph; "
                    "subgraphs are not supported",
                )
    if len(model.training_info) > 0:
        fail(path, "models with training_info are not supported")

    rng = random.Random(seed)
    names = value_names(graph)
    node_names = {n.name for n in graph.node if n.name}
    prefix = fresh_prefix(names | node_names, seed)
    vmap = fresh_names(names, prefix, rng)

    def rn(name):
        return vmap[name] if name else ""

    order, choices = random_topological_order(path, graph, rng)
    node_numbers = list(range(len(order)))
    rng.shuffle(node_numbers)

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    del g.node[:]
    swapped = 0
    swaps = []
    for pos, i in enumerate(order):
        src = graph.node[i]
        node = g.node.add()
        node.CopyFrom(src)
        node.name = f"{prefix}n{node_numbers[pos]}"
        inputs = [rn(x) for x in src.input]
        swap = (
            src.op_type in COMMUTATIVE
            and src.domain in ("", "ai.onnx")
            and len(inputs) == 2
            and rng.random() < 0.5
        )
        if swap:
            inputs.reverse()
            swapped += 1
        swaps.append(swap)
        del node.input[:]
        node.input.extend(inputs)
        del node.output[:]
        node.output.extend(rn(x) for x in src.output)

    inputs = list(g.input)
    for vi in inputs:
        vi.name = rn(vi.name)
    input_order = list(range(len(inputs)))
    rng.shuffle(input_order)
    shuffled = [inputs[k] for k in input_order]
    copies = [type(vi)() for vi in shuffled]
    for c, vi in zip(copies, shuffled):
        c.CopyFrom(vi)
    del g.input[:]
    g.input.extend(copies)

    for vi in g.output:
        vi.name = rn(vi.name)

    def shuffle_repeated(field, rename):
        items = []
        for item in field:
            c = type(item)()
            c.CopyFrom(item)
            rename(c)
            items.append(c)
        rng.shuffle(items)
        del field[:]
        field.extend(items)

    def rename_value_info(vi):
        vi.name = rn(vi.name)

    def rename_tensor(t):
        t.name = rn(t.name)

    def rename_sparse(st):
        st.values.name = rn(st.values.name)
        if st.indices.name:
            st.indices.name = rn(st.indices.name)

    def rename_annotation(ann):
        ann.tensor_name = rn(ann.tensor_name)
        for kv in ann.quant_parameter_tensor_names:
            kv.value = rn(kv.value)

    shuffle_repeated(g.value_info, rename_value_info)
    shuffle_repeated(g.initializer, rename_tensor)
    shuffle_repeated(g.sparse_initializer, rename_sparse)
    shuffle_repeated(g.quantization_annotation, rename_annotation)

    # The result is the input up to the renaming, the order and the swaps.
    back = {v: k for k, v in vmap.items()}
    want = sorted(node_signature(n) for n in graph.node)
    got = sorted(
        node_signature(n, lambda x: back[x], swap) for n, swap in zip(g.node, swaps)
    )
    if want != got:
        fail(path, "internal error: the re-export does not compute the same graph")
    if [back[o.name] for o in g.output] != [o.name for o in graph.output]:
        fail(path, "internal error: the graph outputs changed")
    if sorted(back[i.name] for i in g.input) != sorted(i.name for i in graph.input):
        fail(path, "internal error: the graph inputs changed")

    stats = {
        "seed": seed,
        "nodes": len(order),
        "order_choices": choices,
        "nodes_moved": sum(1 for pos, i in enumerate(order) if pos != i),
        "swapped": swapped,
        "inputs": len(input_order),
        "inputs_moved": sum(1 for pos, k in enumerate(input_order) if pos != k),
        "values_renamed": len(vmap),
    }
    return out, stats


def load_checked(path):
    import onnx

    if not os.path.isfile(path):
        fail(path, "no such file")
    try:
        model = onnx.load(path)
    except Exception as e:  # protobuf's DecodeError, OSError, missing external data
        fail(path, f"not a readable ONNX model ({type(e).__name__}: {e})")
    if not model.HasField("graph"):
        fail(path, "not a valid ONNX model (no graph)")
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:
        fail(path, f"not a valid ONNX model (onnx.checker: {e})")
    return model


def save_checked(path, model):
    import onnx

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        if model.ByteSize() < 2**31 - 1:
            onnx.save(model, path)
        else:
            onnx.save(
                model,
                path,
                save_as_external_data=True,
                location=os.path.basename(path) + ".data",
            )
    except Exception as e:
        fail(path, f"cannot write ({type(e).__name__}: {e})")
    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception as e:
        fail(path, f"the re-export fails onnx.checker ({e})")


def names_of(model):
    return value_names(model.graph) | {n.name for n in model.graph.node if n.name}


def read_back_stats(in_model, out_path):
    """What the written file shares with its input: names and node positions by op."""
    import onnx

    written = onnx.load(out_path)
    kept = names_of(in_model) & names_of(written)
    same_ops = [n.op_type for n in in_model.graph.node] == [
        n.op_type for n in written.graph.node
    ]
    return {"names_kept": len(kept), "op_sequence_same": same_ops}


def main(argv):
    ap = argparse.ArgumentParser(
        description="Semantically identical re-exports of ONNX models "
        "(random topological order, fresh names, swapped commutative inputs, "
        "permuted graph inputs)."
    )
    ap.add_argument("files", nargs="+", help="IN OUT pairs, or inputs with --out-dir")
    ap.add_argument("--out-dir", help="write DIR/<stem>.seed<N>.onnx for each input and seed")
    ap.add_argument(
        "--seed",
        type=int,
        action="append",
        help="random seed (default 0); repeat it with --out-dir for several re-exports",
    )
    ap.add_argument("--report", action="store_true", help="print one JSON line per output")
    args = ap.parse_args(argv)
    seeds = args.seed or [0]

    jobs = []
    if args.out_dir:
        for src in args.files:
            stem = os.path.basename(src)
            if stem.endswith(".onnx"):
                stem = stem[: -len(".onnx")]
            for s in seeds:
                jobs.append((src, os.path.join(args.out_dir, f"{stem}.seed{s}.onnx"), s))
    else:
        if len(args.files) % 2:
            ap.error("give IN OUT pairs (an odd number of files was given), or --out-dir")
        if len(seeds) > 1:
            ap.error("several --seed values need --out-dir")
        for k in range(0, len(args.files), 2):
            jobs.append((args.files[k], args.files[k + 1], seeds[0]))

    try:
        import onnx  # noqa: F401
    except ImportError as e:
        print(f"reexport_onnx.py: the onnx package is missing ({e})", file=sys.stderr)
        return 1

    loaded = {}
    try:
        for src, dst, seed in jobs:
            if os.path.abspath(src) == os.path.abspath(dst):
                fail(dst, "the output would overwrite its input")
            if src not in loaded:
                loaded[src] = load_checked(src)
            model, stats = reexport(src, loaded[src], seed)
            save_checked(dst, model)
            if args.report:
                stats.update(read_back_stats(loaded[src], dst))
                print(json.dumps({"in": src, "out": dst, **stats}), flush=True)
    except ReexportError as e:
        print(f"reexport_onnx.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
