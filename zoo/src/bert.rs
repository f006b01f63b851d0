//! A BERT-base encoder (Hugging Face `BertModel` without the pooler): hidden size 768, 12
//! heads of 64, 12 layers, feed-forward 3072, sequence length 128, batch 1, as the PyTorch
//! ONNX exporter writes it at opset 17. Embeddings: word and token-type lookups (`take`) plus
//! the first 128 rows of the position table (a `[1, 128, 768]` parameter: the exporter
//! constant-folds the position-id gather), then LayerNorm. Each layer: Q, K, V projections,
//! heads split by reshape + transpose (K straight to `[0, 2, 3, 1]`), scaled dot-product
//! attention without a mask (every token attends), output projection, residual, LayerNorm,
//! GELU feed-forward, residual, LayerNorm (eps 1e-12).

use crate::net::{Net, R};
use tgc_ir::{DType, Module};

const SEQ: i64 = 128;
const HIDDEN: i64 = 768;
const HEADS: i64 = 12;
const HEAD_DIM: i64 = HIDDEN / HEADS;
const FFN: i64 = 3072;
const LAYERS: usize = 12;
const VOCAB: i64 = 30522;
const EPS: f64 = 1e-12;

pub(crate) fn bert_base() -> R<Module> {
    let (mut n, inputs) = Net::new(&[
        ("input_ids", &[1, SEQ], DType::I64),
        ("token_type_ids", &[1, SEQ], DType::I64),
    ]);
    let words = n.embedding(inputs[0], "embeddings.word_embeddings", VOCAB, HIDDEN)?;
    let types = n.embedding(inputs[1], "embeddings.token_type_embeddings", 2, HIDDEN)?;
    let mut h = n.add(words, types)?;
    let positions = n.weight("embeddings.position_embeddings.rows", &[1, SEQ, HIDDEN]);
    h = n.add(h, positions)?;
    h = n.layer_norm(h, "embeddings.LayerNorm", EPS)?;
    let split = [1, SEQ, HEADS, HEAD_DIM];
    for l in 0..LAYERS {
        let p = format!("encoder.layer.{l}");
        let q = n.linear(h, &format!("{p}.attention.self.query"), HIDDEN)?;
        let k = n.linear(h, &format!("{p}.attention.self.key"), HIDDEN)?;
        let v = n.linear(h, &format!("{p}.attention.self.value"), HIDDEN)?;
        let q = n.reshape(q, &split)?;
        let q = n.permute(q, &[0, 2, 1, 3])?;
        let k = n.reshape(k, &split)?;
        let k = n.permute(k, &[0, 2, 3, 1])?;
        let v = n.reshape(v, &split)?;
        let v = n.permute(v, &[0, 2, 1, 3])?;
        let scores = n.matmul(q, k)?;
        let scale = n.scalar((HEAD_DIM as f64).sqrt())?;
        let scores = n.div(scores, scale)?;
        let probs = n.softmax(scores)?;
        let context = n.matmul(probs, v)?;
        let context = n.permute(context, &[0, 2, 1, 3])?;
        let context = n.reshape(context, &[1, SEQ, HIDDEN])?;
        let attn = n.linear(context, &format!("{p}.attention.output.dense"), HIDDEN)?;
        let attn = n.add(attn, h)?;
        h = n.layer_norm(attn, &format!("{p}.attention.output.LayerNorm"), EPS)?;
        let ff = n.linear(h, &format!("{p}.intermediate.dense"), FFN)?;
        let ff = n.gelu(ff)?;
        let ff = n.linear(ff, &format!("{p}.output.dense"), HIDDEN)?;
        let ff = n.add(ff, h)?;
        h = n.layer_norm(ff, &format!("{p}.output.LayerNorm"), EPS)?;
    }
    Ok(n.finish("bert_base", &[h]))
}
