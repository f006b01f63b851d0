//! Similarity features of a task: the log2 extents of every tensor (in the structural
//! canonical order, so tasks sharing a structural key compare position by position), the
//! arithmetic work (FLOPs) and the bytes the task reads and writes.

use crate::canon::canonical_order;
use crate::level::Level;
use tgc_ir::{Attr, Attrs, Function, OpPattern, TensorType};

/// Features used to rank structural neighbours.
#[derive(Clone, Debug, PartialEq)]
pub struct Features {
    /// log2 of every extent of every parameter, then of every binding result.
    pub log2_extents: Vec<f64>,
    /// Floating-point operations (multiply-adds count two).
    pub flops: f64,
    /// Bytes of the parameters read plus the results written.
    pub bytes: f64,
}

impl Features {
    pub fn of(f: &Function) -> Features {
        let order = canonical_order(f, Level::Structural);
        let mut log2_extents = Vec::new();
        let mut push =
            |t: &TensorType| log2_extents.extend(t.shape.iter().map(|&d| (d.max(1) as f64).log2()));
        for &pi in &order.params {
            push(f.ty(f.params[pi]));
        }
        let mut flops = 0.0;
        for &bi in &order.bindings {
            let b = &f.bindings[bi];
            for r in &b.results {
                push(f.ty(*r));
            }
            let operands: Vec<&TensorType> = b.operands.iter().map(|v| f.ty(*v)).collect();
            let results: Vec<&TensorType> = b.results.iter().map(|v| f.ty(*v)).collect();
            if let Some(op) = b.callee.op() {
                flops += op_flops(op.name(), op.pattern(), &operands, &results, &b.attrs);
            }
        }
        let bytes = f
            .params
            .iter()
            .map(|p| f.ty(*p).size_bytes() as f64)
            .sum::<f64>()
            + f.results
                .iter()
                .map(|r| f.ty(*r).size_bytes() as f64)
                .sum::<f64>();
        Features {
            log2_extents,
            flops,
            bytes,
        }
    }

    /// Euclidean distance between the log2-extent vectors, plus the log2 ratio of the FLOPs;
    /// `None` when the vectors have different lengths (tasks of different structure).
    pub fn distance(&self, other: &Features) -> Option<f64> {
        if self.log2_extents.len() != other.log2_extents.len() {
            return None;
        }
        let d2: f64 = self
            .log2_extents
            .iter()
            .zip(&other.log2_extents)
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
        let flop_ratio = ((self.flops + 1.0) / (other.flops + 1.0)).log2().abs();
        Some(d2.sqrt() + flop_ratio)
    }

    /// The features as a dictionary attribute (`tgc.features`).
    pub fn to_attr(&self) -> Attr {
        let mut d = Attrs::new();
        d.insert("flops".into(), Attr::Float(self.flops));
        d.insert("bytes".into(), Attr::Float(self.bytes));
        d.insert(
            "log2_extents".into(),
            Attr::floats(self.log2_extents.iter().map(|x| (x * 1e4).round() / 1e4)),
        );
        Attr::Dict(d)
    }
}

fn elems(t: &TensorType) -> f64 {
    t.num_elements() as f64
}

/// Weight elements per output channel of a conv kernel with the given layout: the product of
/// all kernel dims except the one named `channel` ('O' for conv2d, 'I' for the transpose).
fn per_channel_weight(w: &TensorType, layout: &str, channel: char) -> f64 {
    let total = elems(w);
    match layout.find(channel).and_then(|i| w.shape.get(i)) {
        Some(&c) if c > 0 => total / c as f64,
        _ => 0.0,
    }
}

fn layout_attr<'a>(attrs: &'a Attrs, name: &str, default: &'a str) -> &'a str {
    attrs.get(name).and_then(Attr::as_str).unwrap_or(default)
}

/// Approximate FLOPs of one op: exact for convolutions and matrix products, one per output
/// element for elementwise ops, one per input element for reductions, a small multiple for
/// normalizations, zero for pure data movement.
fn op_flops(
    name: &str,
    pattern: OpPattern,
    operands: &[&TensorType],
    results: &[&TensorType],
    attrs: &Attrs,
) -> f64 {
    let out = results.first().map_or(0.0, |r| elems(r));
    let input = operands.first().map_or(0.0, |t| elems(t));
    match name {
        "nn.conv2d" => {
            let w = operands.get(1).copied();
            w.map_or(0.0, |w| {
                2.0 * out * per_channel_weight(w, layout_attr(attrs, "kernel_layout", "OIHW"), 'O')
            })
        }
        "nn.conv2d_transpose" => {
            let w = operands.get(1).copied();
            w.map_or(0.0, |w| {
                2.0 * input
                    * per_channel_weight(w, layout_attr(attrs, "kernel_layout", "IOHW"), 'I')
            })
        }
        "matmul" | "nn.dense" | "nn.batch_matmul" => {
            let k = operands
                .first()
                .and_then(|a| a.shape.last().copied())
                .unwrap_or(1) as f64;
            2.0 * out * k
        }
        "nn.max_pool2d" | "nn.avg_pool2d" => {
            let window: i64 = attrs
                .get("pool_size")
                .and_then(Attr::as_ints)
                .map_or(1, |v| v.iter().product());
            out * window as f64
        }
        "nn.softmax" | "nn.log_softmax" => 4.0 * input,
        "nn.layer_norm" | "nn.batch_norm" => 5.0 * input,
        "constant" => 0.0,
        _ => match pattern {
            OpPattern::ElemWise | OpPattern::Broadcast => out,
            OpPattern::CommReduce => input,
            _ => 0.0,
        },
    }
}
