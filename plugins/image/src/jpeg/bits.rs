//! The entropy-coded bits of a scan and the Huffman tables that read
//! them.

/// A Huffman table: a 9-bit lookup for the short codes, Annex F's
/// `maxcode`/`valptr` for the long ones.
pub struct Huffman {
    /// `(length << 8) | symbol` for codes up to 9 bits, 0 where none starts.
    look: Box<[u16; 512]>,
    /// Where a code and the value after it fit in 9 bits (most AC
    /// coefficients): `value << 16 | run << 8 | both lengths`, else 0.
    fast: Box<[u32; 512]>,
    /// Largest code of each length (-1: none), index 1..=16.
    maxcode: [i32; 18],
    /// Index in `symbols` of each length's first code, minus that code.
    offset: [i32; 17],
    symbols: Vec<u8>,
}

const LOOK_BITS: u32 = 9;

impl Huffman {
    /// From a DHT segment's 16 counts and symbols; `None` when the counts
    /// do not make a prefix code.
    pub fn new(counts: &[u8; 16], symbols: &[u8]) -> Option<Huffman> {
        let mut look = Box::new([0u16; 512]);
        let mut maxcode = [-1i32; 18];
        let mut offset = [0i32; 17];
        let mut code: i32 = 0;
        let mut k = 0usize;
        for len in 1..=16usize {
            let n = usize::from(counts[len - 1]);
            if n > 0 {
                offset[len] = k as i32 - code;
                for _ in 0..n {
                    if code >= 1 << len {
                        return None;
                    }
                    if len as u32 <= LOOK_BITS {
                        let shift = LOOK_BITS - len as u32;
                        let first = (code as usize) << shift;
                        let entry = ((len as u16) << 8) | u16::from(*symbols.get(k)?);
                        look[first..first + (1 << shift)].fill(entry);
                    }
                    code += 1;
                    k += 1;
                }
                maxcode[len] = code - 1;
            }
            code <<= 1;
        }
        maxcode[17] = i32::MAX;
        let mut fast = Box::new([0u32; 512]);
        for (p, f) in fast.iter_mut().enumerate() {
            let entry = look[p];
            let (len, run, size) = (
                u32::from(entry >> 8),
                u32::from(entry >> 4) & 15,
                u32::from(entry) & 15,
            );
            if entry != 0 && size != 0 && len + size <= LOOK_BITS {
                let extra = (p as u32 >> (LOOK_BITS - len - size)) & ((1 << size) - 1);
                let value = extend(extra as i32, size);
                *f = (u32::from(value as i16 as u16) << 16) | (run << 8) | (len + size);
            }
        }
        Some(Huffman {
            look,
            fast,
            maxcode,
            offset,
            symbols: symbols.get(..k)?.to_vec(),
        })
    }
}

/// The entropy-coded bits of a scan, 0xFF00 unstuffed, stopping at the
/// next marker. Past it (or past the end) it reads zeros and counts them,
/// so a scan that needed them is known to be cut short.
pub struct Bits<'a> {
    data: &'a [u8],
    pub pos: usize,
    acc: u64,
    n: u32,
    /// Zero bytes made up past the data.
    padded: u32,
}

impl<'a> Bits<'a> {
    pub fn new(data: &'a [u8], pos: usize) -> Bits<'a> {
        Bits {
            data,
            pos,
            acc: 0,
            n: 0,
            padded: 0,
        }
    }

    /// At least 56 bits held: eight bytes at a time where none of them is
    /// 0xFF, else a byte at a time.
    #[inline]
    pub fn fill(&mut self) {
        if let Some(word) = self.data.get(self.pos..self.pos + 8) {
            let word = u64::from_be_bytes(word.try_into().unwrap_or_default());
            let inverted = !word;
            if inverted.wrapping_sub(0x0101_0101_0101_0101) & !inverted & 0x8080_8080_8080_8080 == 0
            {
                let k = (63 - self.n) / 8;
                let held = self.n + 8 * k;
                self.acc |= (word >> self.n) & !(u64::MAX >> held);
                self.n = held;
                self.pos += k as usize;
                return;
            }
        }
        while self.n <= 56 {
            let mut byte = 0u8;
            match self.data.get(self.pos) {
                Some(&0xFF) => match self.data.get(self.pos + 1) {
                    Some(0) => {
                        byte = 0xFF;
                        self.pos += 2;
                    }
                    _ => self.padded += 1,
                },
                Some(&b) => {
                    byte = b;
                    self.pos += 1;
                }
                None => self.padded += 1,
            }
            self.acc |= u64::from(byte) << (56 - self.n);
            self.n += 8;
        }
    }

    /// Whether the bits used so far were all in the data.
    pub fn whole(&self) -> bool {
        self.padded * 8 <= self.n
    }

    #[inline]
    pub fn bits(&mut self, count: u32) -> u32 {
        if count == 0 {
            return 0;
        }
        if self.n < count {
            self.fill();
        }
        let v = (self.acc >> (64 - count)) as u32;
        self.acc <<= count;
        self.n -= count;
        v
    }

    #[inline]
    pub fn bit(&mut self) -> bool {
        self.bits(1) == 1
    }

    /// `count` bits as the signed value they code (F.2.2.1's EXTEND).
    #[inline]
    pub fn signed(&mut self, count: u32) -> i32 {
        if count == 0 {
            return 0;
        }
        extend(self.bits(count) as i32, count)
    }

    #[inline(always)]
    pub fn symbol(&mut self, table: &Huffman) -> Option<u8> {
        if self.n < 16 {
            self.fill();
        }
        let entry = table.look[(self.acc >> (64 - LOOK_BITS)) as usize];
        if entry != 0 {
            let len = u32::from(entry >> 8);
            self.acc <<= len;
            self.n -= len;
            return Some(entry as u8);
        }
        self.long_symbol(table)
    }

    /// A code longer than the lookup's 9 bits (F.2.2.3's DECODE).
    #[cold]
    #[inline(never)]
    fn long_symbol(&mut self, table: &Huffman) -> Option<u8> {
        for len in LOOK_BITS + 1..=16 {
            let code = (self.acc >> (64 - len)) as i32;
            if code <= table.maxcode[len as usize] {
                self.acc <<= len;
                self.n -= len;
                let at = table.offset[len as usize] + code;
                return table.symbols.get(usize::try_from(at).ok()?).copied();
            }
        }
        None
    }

    /// An AC coefficient whose code and value fit the fast table:
    /// `(run, value)`, the bits consumed.
    #[inline(always)]
    pub fn fast_ac(&mut self, table: &Huffman) -> Option<(usize, i32)> {
        if self.n < 16 {
            self.fill();
        }
        let f = table.fast[(self.acc >> (64 - LOOK_BITS)) as usize];
        if f == 0 {
            return None;
        }
        let len = f & 0xFF;
        self.acc <<= len;
        self.n -= len;
        Some((
            ((f >> 8) & 0xFF) as usize,
            i32::from((f >> 16) as u16 as i16),
        ))
    }

    /// Past a restart marker: the bits left are the interval's padding;
    /// `fill` stops at markers, so the next two bytes must be the marker.
    pub fn restart(&mut self) -> Option<()> {
        self.acc = 0;
        self.n = 0;
        self.padded = 0;
        match (self.data.get(self.pos), self.data.get(self.pos + 1)) {
            (Some(0xFF), Some(0xD0..=0xD7)) => {
                self.pos += 2;
                Some(())
            }
            _ => None,
        }
    }
}

/// `count` bits' value as the signed value they code (F.2.2.1's EXTEND).
#[inline]
fn extend(v: i32, count: u32) -> i32 {
    if v < 1 << (count - 1) {
        v - (1 << count) + 1
    } else {
        v
    }
}
