//! The encoder against BERT written out in f64, on a small model of random
//! weights saved as a `.safetensors` file (the real model's vectors are the
//! e2e test's: `tests/fixtures/embeddings`).

use super::ops::tests::erf_series;
use super::{Bert, Config};

const HIDDEN: usize = 8;
const HEADS: usize = 2;
const INNER: usize = 12;
const LAYERS: usize = 2;
const VOCAB: usize = 11;
const POSITIONS: usize = 40;

/// `len` values in [-1, 1] from a xorshift generator started at `seed`
/// (the same values for the same seed: the tests' weights and operands).
pub(super) fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2654435761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

struct Model {
    tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
}

impl Model {
    fn random() -> Model {
        let mut tensors = Vec::new();
        let mut add = |name: String, shape: Vec<usize>| {
            // A seed per tensor: no two tensors alike.
            let weights = values(shape.iter().product(), tensors.len() as u32 + 1);
            tensors.push((name, shape, weights));
        };
        add(
            "embeddings.word_embeddings.weight".into(),
            vec![VOCAB, HIDDEN],
        );
        add(
            "embeddings.position_embeddings.weight".into(),
            vec![POSITIONS, HIDDEN],
        );
        add(
            "embeddings.token_type_embeddings.weight".into(),
            vec![2, HIDDEN],
        );
        for n in ["embeddings.LayerNorm".to_string()]
            .into_iter()
            .chain((0..LAYERS).flat_map(|i| {
                [
                    format!("encoder.layer.{i}.attention.output.LayerNorm"),
                    format!("encoder.layer.{i}.output.LayerNorm"),
                ]
            }))
        {
            add(format!("{n}.weight"), vec![HIDDEN]);
            add(format!("{n}.bias"), vec![HIDDEN]);
        }
        for i in 0..LAYERS {
            let l = format!("encoder.layer.{i}");
            for (name, outputs, inputs) in [
                (format!("{l}.attention.self.query"), HIDDEN, HIDDEN),
                (format!("{l}.attention.self.key"), HIDDEN, HIDDEN),
                (format!("{l}.attention.self.value"), HIDDEN, HIDDEN),
                (format!("{l}.attention.output.dense"), HIDDEN, HIDDEN),
                (format!("{l}.intermediate.dense"), INNER, HIDDEN),
                (format!("{l}.output.dense"), HIDDEN, INNER),
            ] {
                add(format!("{name}.weight"), vec![outputs, inputs]);
                add(format!("{name}.bias"), vec![outputs]);
            }
        }
        Model { tensors }
    }

    /// The `.safetensors` file, names under `prefix`.
    fn file(&self, prefix: &str) -> Vec<u8> {
        let (mut header, mut data) = (serde_json::Map::new(), Vec::new());
        for (name, shape, values) in &self.tensors {
            let start = data.len();
            data.extend(values.iter().flat_map(|v| v.to_le_bytes()));
            header.insert(
                format!("{prefix}{name}"),
                serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
            );
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend(header);
        file.extend(data);
        file
    }

    fn get(&self, name: &str) -> Vec<f64> {
        let (_, _, v) = self.tensors.iter().find(|(n, _, _)| n == name).unwrap();
        v.iter().map(|&x| x as f64).collect()
    }

    /// BERT in f64, the textbook way: mean-pooled, L2-normalised.
    fn embed(&self, ids: &[u32]) -> Vec<f64> {
        let t = ids.len();
        let (words, positions, types) = (
            self.get("embeddings.word_embeddings.weight"),
            self.get("embeddings.position_embeddings.weight"),
            self.get("embeddings.token_type_embeddings.weight"),
        );
        let mut x: Vec<Vec<f64>> = (0..t)
            .map(|i| {
                (0..HIDDEN)
                    .map(|d| {
                        words[ids[i] as usize * HIDDEN + d] + positions[i * HIDDEN + d] + types[d]
                    })
                    .collect()
            })
            .collect();
        let norm = |x: &mut Vec<Vec<f64>>, name: &str| {
            let (g, b) = (
                self.get(&format!("{name}.weight")),
                self.get(&format!("{name}.bias")),
            );
            for row in x.iter_mut() {
                let mean = row.iter().sum::<f64>() / HIDDEN as f64;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / HIDDEN as f64;
                for (d, v) in row.iter_mut().enumerate() {
                    *v = (*v - mean) / (var + 1e-12).sqrt() * g[d] + b[d];
                }
            }
        };
        let linear = |x: &[Vec<f64>], name: &str| -> Vec<Vec<f64>> {
            let (w, b) = (
                self.get(&format!("{name}.weight")),
                self.get(&format!("{name}.bias")),
            );
            let inputs = x[0].len();
            x.iter()
                .map(|row| {
                    (0..b.len())
                        .map(|o| {
                            b[o] + (0..inputs).map(|i| row[i] * w[o * inputs + i]).sum::<f64>()
                        })
                        .collect()
                })
                .collect()
        };
        norm(&mut x, "embeddings.LayerNorm");
        let size = HIDDEN / HEADS;
        for l in 0..LAYERS {
            let p = format!("encoder.layer.{l}");
            let q = linear(&x, &format!("{p}.attention.self.query"));
            let k = linear(&x, &format!("{p}.attention.self.key"));
            let v = linear(&x, &format!("{p}.attention.self.value"));
            let mut context = vec![vec![0.0; HIDDEN]; t];
            for h in 0..HEADS {
                let cols = h * size..(h + 1) * size;
                for i in 0..t {
                    let scores: Vec<f64> = (0..t)
                        .map(|j| {
                            cols.clone().map(|c| q[i][c] * k[j][c]).sum::<f64>()
                                / (size as f64).sqrt()
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = e.iter().sum();
                    for c in cols.clone() {
                        context[i][c] = (0..t).map(|j| e[j] / total * v[j][c]).sum();
                    }
                }
            }
            let mut a = linear(&context, &format!("{p}.attention.output.dense"));
            a.iter_mut()
                .zip(&x)
                .for_each(|(a, x)| a.iter_mut().zip(x).for_each(|(a, x)| *a += x));
            norm(&mut a, &format!("{p}.attention.output.LayerNorm"));
            let mut inner = linear(&a, &format!("{p}.intermediate.dense"));
            for v in inner.iter_mut().flatten() {
                *v = 0.5 * *v * (1.0 + erf_series(*v / 2f64.sqrt()));
            }
            x = linear(&inner, &format!("{p}.output.dense"));
            x.iter_mut()
                .zip(&a)
                .for_each(|(x, a)| x.iter_mut().zip(a).for_each(|(x, a)| *x += a));
            norm(&mut x, &format!("{p}.output.LayerNorm"));
        }
        let mean: Vec<f64> = (0..HIDDEN)
            .map(|d| x.iter().map(|r| r[d]).sum::<f64>() / t as f64)
            .collect();
        let length = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
        mean.iter().map(|v| v / length).collect()
    }
}

fn config() -> Config {
    serde_json::from_value(serde_json::json!({
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "intermediate_size": INNER, "hidden_act": "gelu",
        "max_position_embeddings": POSITIONS, "type_vocab_size": 2, "layer_norm_eps": 1e-12
    }))
    .unwrap()
}

#[test]
fn the_encoder_is_bert() {
    let model = Model::random();
    for prefix in ["", "bert."] {
        let bert = Bert::load(&model.file(prefix), &config()).unwrap();
        for ids in [
            vec![1u32],
            vec![2, 7, 7, 3],
            (0..37).map(|i| i % VOCAB as u32).collect(),
        ] {
            let (got, want) = (bert.embed(&ids).unwrap(), model.embed(&ids));
            let cosine: f64 = got.iter().zip(&want).map(|(g, w)| *g as f64 * w).sum();
            assert!(cosine > 0.999_999, "{} tokens: cosine {cosine}", ids.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (*g as f64 - w).abs() < 1e-4,
                    "{} tokens: {got:?} against {want:?}",
                    ids.len()
                );
            }
        }
    }
}

#[test]
fn bad_input_is_an_error() {
    let model = Model::random();
    let bert = Bert::load(&model.file(""), &config()).unwrap();
    assert!(bert.embed(&[]).unwrap_err().contains("no tokens"));
    assert!(
        bert.embed(&[VOCAB as u32])
            .unwrap_err()
            .contains("outside the vocabulary")
    );
    let long: Vec<u32> = vec![1; POSITIONS + 1];
    assert!(bert.embed(&long).unwrap_err().contains("positions"));
    let mut other = config();
    other.hidden_act = "relu".into();
    assert!(Bert::load(&model.file(""), &other).is_err());
    other = config();
    other.num_attention_heads = 3;
    assert!(
        Bert::load(&model.file(""), &other)
            .err()
            .unwrap()
            .contains("multiple")
    );
    other = config();
    other.intermediate_size = INNER + 1;
    assert!(
        Bert::load(&model.file(""), &other)
            .err()
            .unwrap()
            .contains("shape")
    );
}
