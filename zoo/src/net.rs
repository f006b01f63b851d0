//! `Net`: a thin layer over the checked builders for writing architectures the way their
//! PyTorch sources read (`conv`, `bn`, `relu`, `linear`, ...), in the inference form an ONNX
//! exporter produces.
//!
//! Conventions shared by every model of the zoo:
//! - Weights are parameters of `@main` (no data), named after the torchvision state-dict
//!   entries, in order of first use; the data input comes first and `@main` carries
//!   `num_input = 1` (2 for BERT), as the ONNX frontend marks graph inputs.
//! - A batch norm directly after a convolution is folded into it, as exporters do: the conv
//!   loses nothing, the BN becomes `add` of a `[1, C, 1, 1]` bias parameter. A batch norm that
//!   follows something else (DenseNet's pre-activation BN after a concat) is a per-channel
//!   affine: `multiply` by a `[1, C, 1, 1]` scale, then `add` of a `[1, C, 1, 1]` shift.
//! - A convolution's own bias is the same `add` of a `[1, C, 1, 1]` parameter.
//! - `nn.Linear` is `matmul` by a `[in, out]` weight and `add` of an `[out]` bias.
//! - Activations are written the way the ONNX frontend (like TVM's) decomposes them: ReLU6 is
//!   `clip(0, 6)`, Hardswish `x * clip(x + 3, 0, 6) / 6`, Hardsigmoid `clip(x / 6 + 0.5, 0, 1)`
//!   with the `1/6` as an f32 constant, GELU `x * (erf(x / sqrt 2) + 1) * 0.5`.
//! - Every scalar constant is rounded to f32 first, so that an ONNX round trip (f32
//!   initializers) gives back the same values and keys.

use tgc_ir::{Attr, Attrs, DType, Function, IrError, Module, TensorType, ValueId};

pub(crate) type R<T> = Result<T, IrError>;

fn attrs<const N: usize>(kv: [(&str, Attr); N]) -> Attrs {
    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A 2-D window: kernel, stride and padding per spatial axis, `(h, w)`.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub k: (i64, i64),
    pub s: (i64, i64),
    pub p: (i64, i64),
}

/// A square window of size `k` with stride `s` and padding `p`.
pub(crate) const fn sq(k: i64, s: i64, p: i64) -> Window {
    Window {
        k: (k, k),
        s: (s, s),
        p: (p, p),
    }
}

/// A rectangular window with stride 1 (Inception's 1x7 / 7x1 convolutions).
pub(crate) const fn rect(kh: i64, kw: i64, ph: i64, pw: i64) -> Window {
    Window {
        k: (kh, kw),
        s: (1, 1),
        p: (ph, pw),
    }
}

pub(crate) struct Net {
    f: Function,
}

impl Net {
    /// A network whose `@main` takes the data inputs `(name, shape, dtype)`.
    pub fn new(inputs: &[(&str, &[i64], DType)]) -> (Net, Vec<ValueId>) {
        let mut f = Function::new("main");
        let ids = inputs
            .iter()
            .map(|(name, shape, dtype)| {
                f.add_param(Some(name), TensorType::new(*dtype, shape.iter().copied()))
            })
            .collect();
        f.attrs
            .insert("num_input".into(), Attr::Int(inputs.len() as i64));
        (Net { f }, ids)
    }

    /// An image network with input `input: [1, 3, size, size]` f32.
    pub fn image(size: i64) -> (Net, ValueId) {
        let (net, ids) = Net::new(&[("input", &[1, 3, size, size], DType::F32)]);
        (net, ids[0])
    }

    pub fn finish(mut self, name: &str, outputs: &[ValueId]) -> Module {
        self.f.results = outputs.iter().copied().collect();
        let mut m = Module::new(name);
        m.add_function(self.f)
            .expect("a fresh module has no function yet");
        m
    }

    pub fn shape(&self, x: ValueId) -> &[i64] {
        &self.f.ty(x).shape
    }

    pub fn channels(&self, x: ValueId) -> i64 {
        self.shape(x)[1]
    }

    pub fn weight(&mut self, name: &str, shape: &[i64]) -> ValueId {
        self.f.add_param(
            Some(name),
            TensorType::new(DType::F32, shape.iter().copied()),
        )
    }

    pub fn op(&mut self, op: &str, operands: &[ValueId], a: Attrs) -> R<ValueId> {
        self.f.push_op1(op, operands, a)
    }

    /// A scalar f32 constant (rounded to f32).
    pub fn scalar(&mut self, v: f64) -> R<ValueId> {
        let v = v as f32 as f64;
        self.op(
            "constant",
            &[],
            attrs([
                ("value", Attr::floats([v])),
                ("shape", Attr::ints([])),
                ("dtype", Attr::str("float32")),
            ]),
        )
    }

    pub fn add(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.op("add", &[a, b], Attrs::new())
    }

    pub fn mul(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.op("multiply", &[a, b], Attrs::new())
    }

    pub fn div(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.op("divide", &[a, b], Attrs::new())
    }

    pub fn relu(&mut self, x: ValueId) -> R<ValueId> {
        self.op("nn.relu", &[x], Attrs::new())
    }

    /// ONNX Clip as exporters write it, its bounds rank-0 tensor inputs (`tensor_bounds`):
    /// what TVM's ONNX frontend reads with maximum/minimum.
    pub fn clip(&mut self, x: ValueId, min: f64, max: f64) -> R<ValueId> {
        self.op(
            "clip",
            &[x],
            attrs([
                ("min", Attr::Float(min)),
                ("max", Attr::Float(max)),
                ("tensor_bounds", Attr::Bool(true)),
            ]),
        )
    }

    pub fn relu6(&mut self, x: ValueId) -> R<ValueId> {
        self.clip(x, 0.0, 6.0)
    }

    /// `x * clip(x + 3, 0, 6) / 6` (HardSwish as exporters before opset 14 write it out).
    pub fn hardswish(&mut self, x: ValueId) -> R<ValueId> {
        let three = self.scalar(3.0)?;
        let shifted = self.add(x, three)?;
        let clipped = self.clip(shifted, 0.0, 6.0)?;
        let six = self.scalar(6.0)?;
        let scaled = self.div(clipped, six)?;
        self.mul(x, scaled)
    }

    /// `clip(x / 6 + 0.5, 0, 1)` (ONNX HardSigmoid with PyTorch's alpha = 1/6).
    pub fn hardsigmoid(&mut self, x: ValueId) -> R<ValueId> {
        let alpha = self.scalar(1.0 / 6.0)?;
        let scaled = self.mul(alpha, x)?;
        let beta = self.scalar(0.5)?;
        let shifted = self.add(scaled, beta)?;
        self.clip(shifted, 0.0, 1.0)
    }

    /// `x * (erf(x / sqrt 2) + 1) * 0.5` (PyTorch's exact GELU as exported before opset 20).
    pub fn gelu(&mut self, x: ValueId) -> R<ValueId> {
        let sqrt2 = self.scalar(std::f64::consts::SQRT_2)?;
        let scaled = self.div(x, sqrt2)?;
        let erf = self.op("erf", &[scaled], Attrs::new())?;
        let one = self.scalar(1.0)?;
        let shifted = self.add(erf, one)?;
        let product = self.mul(x, shifted)?;
        let half = self.scalar(0.5)?;
        self.mul(product, half)
    }

    /// A convolution without bias: `name.weight` is `[cout, cin / groups, kh, kw]`.
    pub fn conv(
        &mut self,
        x: ValueId,
        name: &str,
        cout: i64,
        w: Window,
        groups: i64,
    ) -> R<ValueId> {
        let cin = self.channels(x);
        let weight = self.weight(
            &format!("{name}.weight"),
            &[cout, cin / groups, w.k.0, w.k.1],
        );
        self.op(
            "nn.conv2d",
            &[x, weight],
            attrs([
                ("strides", Attr::ints([w.s.0, w.s.1])),
                ("padding", Attr::ints([w.p.0, w.p.1, w.p.0, w.p.1])),
                ("dilation", Attr::ints([1, 1])),
                ("groups", Attr::Int(groups)),
            ]),
        )
    }

    /// `add` of a `[1, C, 1, 1]` parameter `name`: a conv bias, or a batch norm folded into
    /// the conv before it.
    pub fn channel_bias(&mut self, x: ValueId, name: &str) -> R<ValueId> {
        let c = self.channels(x);
        let b = self.weight(name, &[1, c, 1, 1]);
        self.add(x, b)
    }

    /// A convolution followed by a batch norm, folded: conv, then `add` of the BN's bias.
    pub fn conv_bn(
        &mut self,
        x: ValueId,
        conv: &str,
        bn: &str,
        cout: i64,
        w: Window,
        groups: i64,
    ) -> R<ValueId> {
        let y = self.conv(x, conv, cout, w, groups)?;
        self.channel_bias(y, &format!("{bn}.bias"))
    }

    /// A convolution with its own bias (`nn.Conv2d(..., bias=True)`).
    pub fn conv_biased(&mut self, x: ValueId, name: &str, cout: i64, w: Window) -> R<ValueId> {
        let y = self.conv(x, name, cout, w, 1)?;
        self.channel_bias(y, &format!("{name}.bias"))
    }

    /// A batch norm that cannot be folded (it does not follow a conv): per-channel scale and
    /// shift.
    pub fn bn_affine(&mut self, x: ValueId, name: &str) -> R<ValueId> {
        let c = self.channels(x);
        let scale = self.weight(&format!("{name}.scale"), &[1, c, 1, 1]);
        let y = self.mul(x, scale)?;
        let shift = self.weight(&format!("{name}.shift"), &[1, c, 1, 1]);
        self.add(y, shift)
    }

    pub fn max_pool(&mut self, x: ValueId, w: Window, ceil_mode: bool) -> R<ValueId> {
        self.op(
            "nn.max_pool2d",
            &[x],
            attrs([
                ("pool_size", Attr::ints([w.k.0, w.k.1])),
                ("strides", Attr::ints([w.s.0, w.s.1])),
                ("padding", Attr::ints([w.p.0, w.p.1, w.p.0, w.p.1])),
                ("ceil_mode", Attr::Bool(ceil_mode)),
            ]),
        )
    }

    /// Average pooling; PyTorch's `count_include_pad` defaults to true.
    pub fn avg_pool(&mut self, x: ValueId, w: Window, count_include_pad: bool) -> R<ValueId> {
        self.op(
            "nn.avg_pool2d",
            &[x],
            attrs([
                ("pool_size", Attr::ints([w.k.0, w.k.1])),
                ("strides", Attr::ints([w.s.0, w.s.1])),
                ("padding", Attr::ints([w.p.0, w.p.1, w.p.0, w.p.1])),
                ("count_include_pad", Attr::Bool(count_include_pad)),
            ]),
        )
    }

    /// `AdaptiveAvgPool2d((n, n))` as the TorchScript ONNX exporter writes it: a global mean
    /// for `n = 1`, otherwise an AveragePool of kernel and stride `in / n` (1 when the input
    /// already has size `n`, as in AlexNet and VGG at 224x224).
    pub fn adaptive_avg_pool(&mut self, x: ValueId, n: i64) -> R<ValueId> {
        if n == 1 {
            return self.op(
                "mean",
                &[x],
                attrs([("axis", Attr::ints([2, 3])), ("keepdims", Attr::Bool(true))]),
            );
        }
        let k = self.shape(x)[2] / n;
        self.avg_pool(x, sq(k, k, 0), false)
    }

    /// `torch.flatten(x, 1)`.
    pub fn flatten(&mut self, x: ValueId) -> R<ValueId> {
        let shape = self.shape(x);
        let rest: i64 = shape[1..].iter().product();
        let n = shape[0];
        self.op("reshape", &[x], attrs([("shape", Attr::ints([n, rest]))]))
    }

    pub fn reshape(&mut self, x: ValueId, shape: &[i64]) -> R<ValueId> {
        self.op(
            "reshape",
            &[x],
            attrs([("shape", Attr::ints(shape.iter().copied()))]),
        )
    }

    pub fn permute(&mut self, x: ValueId, axes: &[i64]) -> R<ValueId> {
        self.op(
            "permute_dims",
            &[x],
            attrs([("axes", Attr::ints(axes.iter().copied()))]),
        )
    }

    pub fn concat(&mut self, xs: &[ValueId], axis: i64) -> R<ValueId> {
        self.op("concat", xs, attrs([("axis", Attr::Int(axis))]))
    }

    pub fn matmul(&mut self, a: ValueId, b: ValueId) -> R<ValueId> {
        self.op("matmul", &[a, b], Attrs::new())
    }

    /// `nn.Linear(in, out)`: `matmul` by `name.weight [in, out]`, `add` of `name.bias [out]`.
    pub fn linear(&mut self, x: ValueId, name: &str, out: i64) -> R<ValueId> {
        let cin = *self.shape(x).last().expect("linear input has rank >= 1");
        let w = self.weight(&format!("{name}.weight"), &[cin, out]);
        let y = self.matmul(x, w)?;
        let b = self.weight(&format!("{name}.bias"), &[out]);
        self.add(y, b)
    }

    pub fn softmax(&mut self, x: ValueId) -> R<ValueId> {
        self.op("nn.softmax", &[x], attrs([("axis", Attr::Int(-1))]))
    }

    /// `nn.LayerNorm` over the last axis with `name.weight` and `name.bias`.
    pub fn layer_norm(&mut self, x: ValueId, name: &str, eps: f64) -> R<ValueId> {
        let shape = self.shape(x).to_vec();
        let last = *shape.last().expect("layer norm input has rank >= 1");
        let gamma = self.weight(&format!("{name}.weight"), &[last]);
        let beta = self.weight(&format!("{name}.bias"), &[last]);
        self.op(
            "nn.layer_norm",
            &[x, gamma, beta],
            attrs([
                ("axes", Attr::ints([shape.len() as i64 - 1])),
                ("epsilon", Attr::Float(eps as f32 as f64)),
            ]),
        )
    }

    /// `nn.Embedding` lookup: `take(table, ids)` along axis 0.
    pub fn embedding(&mut self, ids: ValueId, name: &str, rows: i64, dim: i64) -> R<ValueId> {
        let table = self.weight(&format!("{name}.weight"), &[rows, dim]);
        self.op("take", &[table, ids], attrs([("axis", Attr::Int(0))]))
    }
}
