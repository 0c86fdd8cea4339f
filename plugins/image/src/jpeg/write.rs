//! Coefficients to a baseline JPEG file: one interleaved scan, Huffman
//! tables made for the image's own symbols (a first pass counts them:
//! libjpeg's `optimize_coding`, which ImageMagick turns on), no restart
//! markers, no metadata but the JFIF header (as the pixel path writes).

use super::{Block, Frame};

/// Where the symbols of a component with table `t` are counted and coded:
/// its DC table is `2 t`, its AC table `2 t + 1`.
trait Sink {
    /// `symbol` of `table`, then `count` extra bits.
    fn put(&mut self, table: usize, symbol: u8, bits: u32, count: u32);
}

/// Symbol counts, the first pass.
struct Counts([[u32; 257]; 4]);

impl Sink for Counts {
    #[inline(always)]
    fn put(&mut self, table: usize, symbol: u8, _: u32, _: u32) {
        self.0[table][usize::from(symbol)] += 1;
    }
}

/// The entropy-coded data, the second pass.
struct Coder {
    codes: [[(u16, u8); 256]; 4],
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Sink for Coder {
    #[inline(always)]
    fn put(&mut self, table: usize, symbol: u8, bits: u32, count: u32) {
        let (code, len) = self.codes[table][usize::from(symbol)];
        self.bits((u32::from(code) << count) | bits, u32::from(len) + count);
    }
}

impl Coder {
    /// `count` (at most 27) bits, written out 32 at a time.
    #[inline(always)]
    fn bits(&mut self, bits: u32, count: u32) {
        self.acc = (self.acc << count) | u64::from(bits & ((1u32 << count) - 1));
        self.n += count;
        if self.n >= 32 {
            let word = (self.acc >> (self.n - 32)) as u32;
            self.n -= 32;
            // A byte 0xFF is followed by a stuffed 0x00; most words have none.
            let inverted = !word;
            if inverted.wrapping_sub(0x0101_0101) & !inverted & 0x8080_8080 == 0 {
                self.out.extend_from_slice(&word.to_be_bytes());
            } else {
                for b in word.to_be_bytes() {
                    self.out.push(b);
                    if b == 0xFF {
                        self.out.push(0);
                    }
                }
            }
        }
    }

    /// The last bits, padded with ones to a whole byte.
    fn finish(mut self) -> Vec<u8> {
        let pad = (8 - self.n % 8) % 8;
        self.bits((1 << pad) - 1, pad);
        let n = self.n;
        for i in 0..n / 8 {
            let b = (self.acc >> (n - 8 * (i + 1))) as u8;
            self.out.push(b);
            if b == 0xFF {
                self.out.push(0);
            }
        }
        self.out
    }
}

/// `v`'s magnitude category and its extra bits (F.1.2.1).
#[inline]
fn category(v: i32) -> (u32, u32) {
    let n = 32 - v.unsigned_abs().leading_zeros();
    let bits = if v < 0 { (v - 1) as u32 } else { v as u32 };
    (n, bits & ((1u32 << n) - 1))
}

/// One block: its DC difference, then its AC run lengths.
#[inline]
fn block<S: Sink>(sink: &mut S, b: &Block, pred: &mut i16, t: usize) {
    let (n, bits) = category(i32::from(b[0]) - i32::from(*pred));
    *pred = b[0];
    sink.put(2 * t, n as u8, bits, n);
    let mut nonzero = super::nonzero(b) & !1;
    let mut last = 0;
    while nonzero != 0 {
        let k = nonzero.trailing_zeros();
        nonzero &= nonzero - 1;
        let mut run = k - last - 1;
        while run > 15 {
            sink.put(2 * t + 1, 0xF0, 0, 0);
            run -= 16;
        }
        let (n, bits) = category(i32::from(b[k as usize]));
        sink.put(2 * t + 1, ((run << 4) | n) as u8, bits, n);
        last = k;
    }
    if last < 63 {
        sink.put(2 * t + 1, 0, 0, 0);
    }
}

/// Every block in the scan's order.
fn walk<S: Sink>(f: &Frame, sink: &mut S) {
    let mut pred = vec![0i16; f.components.len()];
    // One component: its scan walks its coded blocks, not whole MCUs.
    if let [c] = f.components.as_slice() {
        for y in 0..c.coded_h {
            for x in 0..c.coded_w {
                block(sink, &c.blocks[y * c.bw + x], &mut pred[0], c.tq);
            }
        }
        return;
    }
    for my in 0..f.mcuy {
        for mx in 0..f.mcux {
            for (i, c) in f.components.iter().enumerate() {
                let (h, v) = (usize::from(c.h), usize::from(c.v));
                for by in 0..v {
                    let row = (my * v + by) * c.bw + mx * h;
                    for b in &c.blocks[row..row + h] {
                        block(sink, b, &mut pred[i], c.tq);
                    }
                }
            }
        }
    }
}

/// A Huffman table for `freq` (K.2, codes at most 16 bits, none all ones):
/// the 16 counts and the symbols by code length.
fn optimal(freq: &[u32; 257]) -> ([u8; 16], Vec<u8>) {
    let mut freq = *freq;
    freq[256] = 1; // reserves the all-ones code
    let mut size = [0usize; 257];
    let mut others = [usize::MAX; 257];
    loop {
        // The two least frequent; on a tie the larger symbol.
        let (mut c1, mut c2) = (usize::MAX, usize::MAX);
        let (mut v1, mut v2) = (u32::MAX, u32::MAX);
        for (i, &f) in freq.iter().enumerate() {
            if f == 0 {
                continue;
            }
            if f <= v1 {
                (c2, v2) = (c1, v1);
                (c1, v1) = (i, f);
            } else if f <= v2 {
                (c2, v2) = (i, f);
            }
        }
        if c2 == usize::MAX {
            break;
        }
        freq[c1] += freq[c2];
        freq[c2] = 0;
        let mut c = c1;
        size[c] += 1;
        while others[c] != usize::MAX {
            c = others[c];
            size[c] += 1;
        }
        others[c] = c2;
        let mut c = c2;
        size[c] += 1;
        while others[c] != usize::MAX {
            c = others[c];
            size[c] += 1;
        }
    }
    let mut bits = [0u32; 64];
    for &s in &size {
        if s > 0 {
            bits[s] += 1;
        }
    }
    // Longer than 16 bits: moved up the tree (K.3's adjustment).
    for i in (17..64).rev() {
        while bits[i] > 0 {
            let mut j = i - 2;
            while bits[j] == 0 {
                j -= 1;
            }
            bits[i] -= 2;
            bits[i - 1] += 1;
            bits[j + 1] += 2;
            bits[j] -= 1;
        }
    }
    // The reserved code leaves the longest length.
    let mut i = 16;
    while bits[i] == 0 {
        i -= 1;
    }
    bits[i] -= 1;
    let mut symbols = Vec::new();
    for len in 1..64 {
        for (s, &z) in size.iter().enumerate().take(256) {
            if z == len {
                symbols.push(s as u8);
            }
        }
    }
    let counts = std::array::from_fn(|i| bits[i + 1] as u8);
    (counts, symbols)
}

/// The codes of a table given as counts and symbols (C.2, C.3).
fn codes(counts: &[u8; 16], symbols: &[u8]) -> [(u16, u8); 256] {
    let mut out = [(0, 0); 256];
    let (mut code, mut k) = (0u16, 0);
    for (i, &n) in counts.iter().enumerate() {
        for _ in 0..n {
            out[usize::from(symbols[k])] = (code, i as u8 + 1);
            code += 1;
            k += 1;
        }
        code <<= 1;
    }
    out
}

fn segment(out: &mut Vec<u8>, marker: u8, body: &[u8]) {
    out.extend_from_slice(&[0xFF, marker]);
    out.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// The file.
pub fn write(f: &Frame) -> Vec<u8> {
    let mut counts = Counts([[0; 257]; 4]);
    walk(f, &mut counts);
    let used = if f.components.len() == 1 { 1 } else { 2 };
    let tables: Vec<([u8; 16], Vec<u8>)> = counts.0[..2 * used].iter().map(optimal).collect();

    let mut out = Vec::with_capacity(1 << 16);
    out.extend_from_slice(&[0xFF, 0xD8]);
    segment(
        &mut out,
        0xE0,
        b"JFIF\0\x01\x01\x00\x00\x01\x00\x01\x00\x00",
    );
    let mut dqt = Vec::new();
    for t in 0..used {
        let c = f
            .components
            .iter()
            .find(|c| c.tq == t)
            .unwrap_or(&f.components[0]);
        dqt.push(t as u8);
        dqt.extend(c.table.iter().map(|&q| q.min(255) as u8));
    }
    segment(&mut out, 0xDB, &dqt);
    let mut sof = vec![8];
    sof.extend_from_slice(&(f.height as u16).to_be_bytes());
    sof.extend_from_slice(&(f.width as u16).to_be_bytes());
    sof.push(f.components.len() as u8);
    for c in &f.components {
        sof.extend_from_slice(&[c.id, (c.h << 4) | c.v, c.tq as u8]);
    }
    segment(&mut out, 0xC0, &sof);
    let mut dht = Vec::new();
    for (i, (counts, symbols)) in tables.iter().enumerate() {
        // DC tables are class 0, AC class 1; table `i / 2`.
        dht.push((((i % 2) as u8) << 4) | (i / 2) as u8);
        dht.extend_from_slice(counts);
        dht.extend_from_slice(symbols);
    }
    segment(&mut out, 0xC4, &dht);
    let mut sos = vec![f.components.len() as u8];
    for c in &f.components {
        sos.extend_from_slice(&[c.id, ((c.tq as u8) << 4) | c.tq as u8]);
    }
    sos.extend_from_slice(&[0, 63, 0]);
    segment(&mut out, 0xDA, &sos);

    let mut coder = Coder {
        codes: [[(0, 0); 256]; 4],
        out,
        acc: 0,
        n: 0,
    };
    for (i, (counts, symbols)) in tables.iter().enumerate() {
        coder.codes[i] = codes(counts, symbols);
    }
    walk(f, &mut coder);
    let mut out = coder.finish();
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}
