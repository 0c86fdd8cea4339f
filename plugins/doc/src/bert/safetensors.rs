//! The tensors of a `.safetensors` file (Hugging Face's format: an 8-byte
//! little-endian header length, a JSON header naming each tensor's dtype,
//! shape and byte range, then the data). 32-bit floats only: the model
//! this encoder runs stores them.

use std::collections::HashMap;

use serde::Deserialize;

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// The file's tensors by name, read from its bytes when asked for.
pub struct Tensors<'a> {
    entries: HashMap<String, Entry>,
    data: &'a [u8],
}

impl<'a> Tensors<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Tensors<'a>, String> {
        let len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or("shorter than its header's length")?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| len.checked_add(8))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| format!("a header of {len} bytes in a file of {}", bytes.len()))?;
        let header: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&bytes[8..end]).map_err(|e| format!("its header: {e}"))?;
        let mut entries = HashMap::new();
        for (name, value) in header {
            if name == "__metadata__" {
                continue;
            }
            let entry: Entry =
                serde_json::from_value(value).map_err(|e| format!("tensor {name}: {e}"))?;
            entries.insert(name, entry);
        }
        Ok(Tensors {
            entries,
            data: &bytes[end..],
        })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    /// The values of tensor `name`, which must have `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| format!("no tensor {name}"))?;
        if e.dtype != "F32" {
            return Err(format!("tensor {name} is {}, not F32", e.dtype));
        }
        if e.shape != shape {
            return Err(format!(
                "tensor {name} has shape {:?}, not {shape:?}",
                e.shape
            ));
        }
        let count: usize = shape.iter().product();
        let [start, end] = e.data_offsets;
        let bytes = self
            .data
            .get(start..end)
            .filter(|b| b.len() == count * 4)
            .ok_or_else(|| {
                format!("tensor {name}: bytes {start}..{end} do not hold {count} values")
            })?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut f = (header.len() as u64).to_le_bytes().to_vec();
        f.extend_from_slice(header.as_bytes());
        f.extend_from_slice(data);
        f
    }

    #[test]
    fn reads_a_tensor_by_name_and_shape() {
        let data: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let f = file(
            r#"{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            &data,
        );
        let t = Tensors::parse(&f).unwrap();
        assert!(t.contains("w") && !t.contains("__metadata__"));
        assert_eq!(t.get("w", &[2]).unwrap(), vec![1.5, -2.0]);
        assert!(t.get("w", &[1, 2]).unwrap_err().contains("shape [2]"));
        assert!(t.get("x", &[2]).unwrap_err().contains("no tensor x"));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(Tensors::parse(b"\x01").is_err());
        assert!(Tensors::parse(&u64::MAX.to_le_bytes()).is_err());
        assert!(Tensors::parse(&file("{not json", &[])).is_err());
        let half = file(
            r#"{"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}"#,
            &[0, 0],
        );
        assert!(
            Tensors::parse(&half)
                .unwrap()
                .get("w", &[1])
                .unwrap_err()
                .contains("F16")
        );
        let short = file(
            r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
            &[0; 4],
        );
        assert!(Tensors::parse(&short).unwrap().get("w", &[2]).is_err());
    }
}
