//! A JPEG file to its quantised DCT coefficients, without the inverse DCT:
//! markers, quantisation and Huffman tables, baseline and progressive
//! scans, restart intervals. Anything this reader does not know, or any
//! damage, is `None`: the caller then takes the pixel path, whose decoder
//! gives the caller's error.

use super::bits::{Bits, Huffman};
use super::{Block, Component, Frame};
use crate::decode;

/// Most bytes the coefficients of one image may take (two per coefficient).
const MAX_COEFFICIENT_BYTES: usize = 192 << 20;

#[cfg(test)]
thread_local! {
    /// MCU rows this thread's reads have walked (a test's count).
    pub static ROWS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What a scan's header says.
struct Scan {
    /// Indexes into the frame's components, with their DC and AC tables.
    comps: Vec<(usize, usize, usize)>,
    ss: usize,
    se: usize,
    ah: u32,
    al: u32,
}

/// The file's coefficients, or `None` for anything this reader leaves to
/// the pixel path (see the module's doc).
pub fn read(bytes: &[u8]) -> Option<Frame> {
    let mut r = Reader {
        bytes,
        pos: 2,
        qt: [None, None, None, None],
        dc: [None, None, None, None],
        ac: [None, None, None, None],
        restart: 0,
        frame: None,
        progressive: false,
        adobe_transform: None,
        scanned: Vec::new(),
    };
    if bytes.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    loop {
        // Fill bytes, then the marker.
        while *r.bytes.get(r.pos)? != 0xFF {
            r.pos += 1;
        }
        while *r.bytes.get(r.pos)? == 0xFF {
            r.pos += 1;
        }
        let marker = *r.bytes.get(r.pos)?;
        r.pos += 1;
        match marker {
            0xD9 => break,
            // A stuffed 0xFF00 left after a scan's last bits, a restart marker, TEM.
            0x00 | 0xD0..=0xD7 | 0x01 => {}
            _ => {
                let len = usize::from(u16::from_be_bytes([
                    *r.bytes.get(r.pos)?,
                    *r.bytes.get(r.pos + 1)?,
                ]));
                let body = r.bytes.get(r.pos + 2..r.pos + len.checked_sub(2)? + 2)?;
                r.pos += len;
                match marker {
                    0xC0 | 0xC1 => r.frame_header(body, false)?,
                    0xC2 => r.frame_header(body, true)?,
                    // Lossless, hierarchical, arithmetic-coded: the pixel path.
                    0xC3 | 0xC5..=0xC7 | 0xC8..=0xCB | 0xCD..=0xCF => return None,
                    0xC4 => r.huffman_tables(body)?,
                    0xDB => r.quantisation_tables(body)?,
                    0xDD => {
                        r.restart = usize::from(u16::from_be_bytes([*body.first()?, *body.get(1)?]))
                    }
                    0xDA => r.scan(body)?,
                    0xEE if body.starts_with(b"Adobe") => r.adobe_transform = Some(*body.get(11)?),
                    _ => {}
                }
            }
        }
    }
    let frame = r.frame?;
    // Every component coded, by a whole baseline scan or at least its
    // first DC scan; colour as YCbCr (three) or grey (one).
    if r.scanned.iter().any(|s| !s) {
        return None;
    }
    if frame.components.len() == 3 {
        let ids: Vec<u8> = frame.components.iter().map(|c| c.id).collect();
        match r.adobe_transform {
            Some(1) => {}
            Some(_) => return None,
            None if ids == b"RGB" => return None,
            None => {}
        }
    }
    Some(frame)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    qt: [Option<[u16; 64]>; 4],
    dc: [Option<Huffman>; 4],
    ac: [Option<Huffman>; 4],
    restart: usize,
    frame: Option<Frame>,
    progressive: bool,
    adobe_transform: Option<u8>,
    /// Per component: coded by a baseline scan or a first DC scan.
    scanned: Vec<bool>,
}

impl Reader<'_> {
    fn frame_header(&mut self, b: &[u8], progressive: bool) -> Option<()> {
        if self.frame.is_some() || *b.first()? != 8 {
            return None;
        }
        let height = u32::from(u16::from_be_bytes([*b.get(1)?, *b.get(2)?]));
        let width = u32::from(u16::from_be_bytes([*b.get(3)?, *b.get(4)?]));
        let n = usize::from(*b.get(5)?);
        // A height of 0 (set by a DNL marker later) is left to the pixel path.
        if !(n == 1 || n == 3) || decode::check_budget(width, height).is_err() {
            return None;
        }
        let mut specs = Vec::with_capacity(n);
        for i in 0..n {
            let c = b.get(6 + 3 * i..9 + 3 * i)?;
            let (h, v, tq) = (c[1] >> 4, c[1] & 15, usize::from(c[2]));
            if !(1..=4).contains(&h) || !(1..=4).contains(&v) || tq > 3 {
                return None;
            }
            specs.push((c[0], h, v, tq));
        }
        let hmax = specs.iter().map(|s| s.1).max()?;
        let vmax = specs.iter().map(|s| s.2).max()?;
        let mcux = width.div_ceil(8 * u32::from(hmax)) as usize;
        let mcuy = height.div_ceil(8 * u32::from(vmax)) as usize;
        let mut components = Vec::with_capacity(n);
        let mut total = 0usize;
        for (id, h, v, tq) in specs {
            let (bw, bh) = (mcux * usize::from(h), mcuy * usize::from(v));
            total = total.checked_add(bw.checked_mul(bh)?)?;
            if total.checked_mul(std::mem::size_of::<Block>())? > MAX_COEFFICIENT_BYTES {
                return None;
            }
            let cw = (u64::from(width) * u64::from(h)).div_ceil(u64::from(hmax));
            let ch = (u64::from(height) * u64::from(v)).div_ceil(u64::from(vmax));
            components.push(Component {
                id,
                h,
                v,
                tq,
                coded_w: cw.div_ceil(8) as usize,
                coded_h: ch.div_ceil(8) as usize,
                bw,
                bh,
                blocks: vec![[0i16; 64]; bw * bh],
                table: [0; 64],
            });
        }
        self.scanned = vec![false; n];
        self.progressive = progressive;
        self.frame = Some(Frame {
            width,
            height,
            hmax,
            vmax,
            mcux,
            mcuy,
            components,
        });
        Some(())
    }

    fn huffman_tables(&mut self, mut b: &[u8]) -> Option<()> {
        while !b.is_empty() {
            let (class, id) = (b[0] >> 4, usize::from(b[0] & 15));
            let counts: [u8; 16] = b.get(1..17)?.try_into().ok()?;
            let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
            if n > 256 || id > 3 || class > 1 {
                return None;
            }
            let table = Huffman::new(&counts, b.get(17..17 + n)?)?;
            if class == 0 {
                self.dc[id] = Some(table);
            } else {
                self.ac[id] = Some(table);
            }
            b = &b[17 + n..];
        }
        Some(())
    }

    fn quantisation_tables(&mut self, mut b: &[u8]) -> Option<()> {
        while !b.is_empty() {
            let (precision, id) = (b[0] >> 4, usize::from(b[0] & 15));
            if id > 3 || precision > 1 {
                return None;
            }
            let size = 1 + 64 * (usize::from(precision) + 1);
            let body = b.get(1..size)?;
            let mut t = [0u16; 64];
            for (k, q) in t.iter_mut().enumerate() {
                *q = if precision == 0 {
                    u16::from(body[k])
                } else {
                    u16::from_be_bytes([body[2 * k], body[2 * k + 1]])
                };
                if *q == 0 {
                    return None;
                }
            }
            self.qt[id] = Some(t);
            b = &b[size..];
        }
        Some(())
    }

    /// A scan's header, then its entropy-coded data.
    fn scan(&mut self, b: &[u8]) -> Option<()> {
        let frame = self.frame.as_ref()?;
        let n = usize::from(*b.first()?);
        if n == 0 || n > frame.components.len() {
            return None;
        }
        let mut comps = Vec::with_capacity(n);
        for i in 0..n {
            let s = b.get(1 + 2 * i..3 + 2 * i)?;
            let at = frame.components.iter().position(|c| c.id == s[0])?;
            let (td, ta) = (usize::from(s[1] >> 4), usize::from(s[1] & 15));
            if td > 3 || ta > 3 || comps.iter().any(|c: &(usize, usize, usize)| c.0 == at) {
                return None;
            }
            comps.push((at, td, ta));
        }
        let tail = b.get(1 + 2 * n..4 + 2 * n)?;
        let scan = Scan {
            comps,
            ss: usize::from(tail[0]),
            se: usize::from(tail[1]),
            ah: u32::from(tail[2] >> 4),
            al: u32::from(tail[2] & 15),
        };
        if self.progressive {
            let dc = scan.ss == 0;
            if (dc && scan.se != 0)
                || (!dc && (scan.se < scan.ss || scan.se > 63 || scan.comps.len() != 1))
                || scan.al > 13
                || scan.ah > 13
            {
                return None;
            }
        } else if scan.ss != 0 || scan.se != 63 || scan.ah != 0 || scan.al != 0 {
            return None;
        }
        // The tables the scan uses must be there.
        for &(_, td, ta) in &scan.comps {
            if (scan.ss == 0 && scan.ah == 0 && self.dc[td].is_none())
                || (scan.se > 0 && self.ac[ta].is_none())
            {
                return None;
            }
        }
        if scan.ss == 0 && scan.ah == 0 {
            for c in &scan.comps {
                self.scanned[c.0] = true;
            }
        }
        // A component's quantisation table is the one defined when its
        // first scan starts (as libjpeg latches it).
        let frame = self.frame.as_mut()?;
        for &(at, _, _) in &scan.comps {
            let c = &mut frame.components[at];
            if c.table[0] == 0 {
                c.table = self.qt[c.tq]?;
            }
        }
        let end = self.decode(&scan)?;
        self.pos = end;
        Some(())
    }

    /// The scan's blocks; answers where its data ends.
    fn decode(&mut self, scan: &Scan) -> Option<usize> {
        let frame = self.frame.as_mut()?;
        let mut bits = Bits::new(self.bytes, self.pos);
        let mut pred = vec![0i32; scan.comps.len()];
        let mut eobrun = 0u32;
        // MCUs: interleaved scans walk the frame's; a single component's
        // scan walks that component's coded blocks one at a time.
        let single = scan.comps.len() == 1;
        let (mx, my) = if single {
            let c = &frame.components[scan.comps[0].0];
            (c.coded_w, c.coded_h)
        } else {
            (frame.mcux, frame.mcuy)
        };
        let tables = Tables {
            dc: &self.dc,
            ac: &self.ac,
        };
        let mut left = self.restart;
        for y in 0..my {
            // A file cut short (or a large frame declared over a few bytes)
            // is given up at the end of the row it ran out in.
            if !bits.whole() {
                return None;
            }
            #[cfg(test)]
            ROWS.with(|r| r.set(r.get() + 1));
            for x in 0..mx {
                if self.restart > 0 {
                    if left == 0 {
                        if !bits.whole() {
                            return None;
                        }
                        bits.restart()?;
                        pred.fill(0);
                        eobrun = 0;
                        left = self.restart;
                    }
                    left -= 1;
                }
                for (i, &(at, td, ta)) in scan.comps.iter().enumerate() {
                    let c = &mut frame.components[at];
                    let (h, v) = if single {
                        (1, 1)
                    } else {
                        (usize::from(c.h), usize::from(c.v))
                    };
                    for by in 0..v {
                        for bx in 0..h {
                            let (col, row) = (x * h + bx, y * v + by);
                            let block = c.blocks.get_mut(row * c.bw + col)?;
                            let t = (td, ta);
                            if self.progressive {
                                progressive(
                                    &mut bits,
                                    &tables,
                                    t,
                                    scan,
                                    block,
                                    &mut pred[i],
                                    &mut eobrun,
                                )?;
                            } else {
                                baseline(&mut bits, &tables, t, block, &mut pred[i])?;
                            }
                        }
                    }
                }
            }
        }
        if !bits.whole() {
            return None;
        }
        Some(bits.pos)
    }
}

struct Tables<'a> {
    dc: &'a [Option<Huffman>; 4],
    ac: &'a [Option<Huffman>; 4],
}

/// A DC value, checked to fit.
fn dc_value(pred: &mut i32, diff: i32, al: u32) -> Option<i16> {
    *pred = pred.checked_add(diff)?;
    i16::try_from(pred.checked_mul(1 << al)?).ok()
}

fn baseline(
    bits: &mut Bits,
    t: &Tables,
    (td, ta): (usize, usize),
    block: &mut Block,
    pred: &mut i32,
) -> Option<()> {
    let (dc, ac) = (t.dc[td].as_ref()?, t.ac[ta].as_ref()?);
    let s = u32::from(bits.symbol(dc)?);
    if s > 11 {
        return None;
    }
    block[0] = dc_value(pred, bits.signed(s), 0)?;
    let mut k = 1;
    while k < 64 {
        if let Some((run, value)) = bits.fast_ac(ac) {
            k += run;
            *block.get_mut(k)? = value as i16;
            k += 1;
            continue;
        }
        let rs = bits.symbol(ac)?;
        let (r, s) = (usize::from(rs >> 4), u32::from(rs & 15));
        if s == 0 {
            if r != 15 {
                break;
            }
            k += 16;
            continue;
        }
        k += r;
        if k > 63 || s > 10 {
            return None;
        }
        block[k] = bits.signed(s) as i16;
        k += 1;
    }
    Some(())
}

/// One block's part of a progressive scan (G.1.2: DC first and refining,
/// AC first and refining with end-of-band runs).
fn progressive(
    bits: &mut Bits,
    t: &Tables,
    (td, ta): (usize, usize),
    scan: &Scan,
    block: &mut Block,
    pred: &mut i32,
    eobrun: &mut u32,
) -> Option<()> {
    let (ss, se, al) = (scan.ss, scan.se, scan.al);
    if ss == 0 {
        if scan.ah == 0 {
            let s = u32::from(bits.symbol(t.dc[td].as_ref()?)?);
            if s > 11 {
                return None;
            }
            block[0] = dc_value(pred, bits.signed(s), al)?;
        } else if bits.bit() {
            block[0] |= 1 << al;
        }
        return Some(());
    }
    let ac = t.ac[ta].as_ref()?;
    if scan.ah == 0 {
        if *eobrun > 0 {
            *eobrun -= 1;
            return Some(());
        }
        let mut k = ss;
        while k <= se {
            if let Some((run, value)) = bits.fast_ac(ac) {
                k += run;
                if k > se {
                    return None;
                }
                block[k] = i16::try_from(value * (1 << al)).ok()?;
                k += 1;
                continue;
            }
            let rs = bits.symbol(ac)?;
            let (r, s) = (u32::from(rs >> 4), u32::from(rs & 15));
            if s == 0 {
                if r < 15 {
                    *eobrun = (1 << r) - 1 + bits.bits(r);
                    break;
                }
                k += 16;
                continue;
            }
            k += r as usize;
            if k > se || s > 10 {
                return None;
            }
            block[k] = i16::try_from(bits.signed(s) * (1 << al)).ok()?;
            k += 1;
        }
        return Some(());
    }
    // Refining: correction bits for the coefficients already non-zero,
    // new ones of ±1 << al placed among the zeros.
    let (p1, m1) = (1i16 << al, (-1i16) << al);
    let mut k = ss;
    if *eobrun == 0 {
        while k <= se {
            let rs = bits.symbol(ac)?;
            let (mut r, s) = (i32::from(rs >> 4), rs & 15);
            let mut value = 0i16;
            if s != 0 {
                if s != 1 {
                    return None;
                }
                value = if bits.bit() { p1 } else { m1 };
            } else if r != 15 {
                *eobrun = (1u32 << r) + bits.bits(r as u32);
                break;
            }
            while k <= se {
                let c = &mut block[k];
                if *c != 0 {
                    if bits.bit() && *c & p1 == 0 {
                        *c = c.wrapping_add(if *c >= 0 { p1 } else { m1 });
                    }
                } else {
                    r -= 1;
                    if r < 0 {
                        break;
                    }
                }
                k += 1;
            }
            if value != 0 {
                *block.get_mut(k).filter(|_| k <= se)? = value;
            }
            k += 1;
        }
    }
    if *eobrun > 0 {
        while k <= se {
            let c = &mut block[k];
            if *c != 0 && bits.bit() && *c & p1 == 0 {
                *c = c.wrapping_add(if *c >= 0 { p1 } else { m1 });
            }
            k += 1;
        }
        *eobrun -= 1;
    }
    Some(())
}
