//! JPEG to JPEG at another quality without going through pixels: the
//! file's quantised DCT coefficients are read ([`read`]), scaled from its
//! quantisation tables to the new quality's ([`requantise`]; chroma halved
//! in the DCT domain where the output subsamples more than the input), and
//! written baseline with Huffman tables made for them ([`write`]), as
//! ImageMagick writes JPEG. What a compress cost on the pixel path (the
//! inverse and forward DCTs, colour conversion both ways, upsampling) is
//! gone; the two entropy coders are what is left (#42, docs/benchmarks.md).
//!
//! Only for what it can keep exactly as the pixel path would write it:
//! 8-bit YCbCr or grey, baseline or progressive Huffman coding, and a
//! chroma the output keeps or halves. Anything else (CMYK, RGB-coded,
//! arithmetic coding, 12-bit, an output that would need chroma upsampled,
//! damage of any kind) is `None`, and the caller takes the pixel path,
//! whose decoder gives the caller's error for a broken file.

mod bits;
mod read;
mod requantise;
mod write;

#[cfg(test)]
mod tests;

/// One 8×8 block's quantised coefficients, in zigzag order.
pub type Block = [i16; 64];

/// One colour component: its sampling, its blocks and its table.
pub struct Component {
    pub id: u8,
    pub h: u8,
    pub v: u8,
    /// Quantisation table index.
    pub tq: usize,
    /// Blocks that cover the component's own samples (a single
    /// component's scan codes these).
    pub coded_w: usize,
    pub coded_h: usize,
    /// Blocks stored: the MCU grid's, a whole number of MCUs.
    pub bw: usize,
    pub bh: usize,
    pub blocks: Vec<Block>,
    /// The quantisation table, zigzag order (all zero until the reader
    /// latches it at the component's first scan; no entry of a table is 0).
    pub table: [u16; 64],
}

/// A frame: its size, sampling and components.
pub struct Frame {
    pub width: u32,
    pub height: u32,
    pub hmax: u8,
    pub vmax: u8,
    pub mcux: usize,
    pub mcuy: usize,
    pub components: Vec<Component>,
}

/// Zigzag position → natural (row-major) position.
pub const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// A block's non-zero coefficients as bits (bit `k` for `block[k]`), four
/// at a time: each 16-bit lane's top bit set where the lane is not zero,
/// then the four top bits gathered by one multiply.
#[inline]
pub fn nonzero(block: &Block) -> u64 {
    const LOW: u64 = 0x7FFF_7FFF_7FFF_7FFF;
    let mut mask = 0u64;
    for (i, four) in block.chunks_exact(4).enumerate() {
        let lane = |j: usize| u64::from(four[j] as u16) << (16 * j);
        let w = lane(0) | lane(1) | lane(2) | lane(3);
        let top = (((w & LOW) + LOW) | w) & !LOW;
        let bits = ((top >> 15).wrapping_mul(1 | 1 << 15 | 1 << 30 | 1 << 45) >> 45) & 0xF;
        mask |= bits << (4 * i);
    }
    mask
}

/// `bytes` (a JPEG) written again at `quality` (1–100), or `None` when it
/// has to go through pixels (see the module's doc).
pub fn recompress(bytes: &[u8], quality: u8) -> Option<Vec<u8>> {
    let frame = read::read(bytes)?;
    let out = requantise::requantise(&frame, quality.clamp(1, 100))?;
    Some(write::write(&out))
}
