//! The coefficient path against the pixel path: the same files written at
//! the same quality must decode to images as close to the source, at most a
//! few percent larger, and nothing this reader is handed may panic.

use image::{DynamicImage, RgbImage};
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};

use super::recompress;
use crate::format::{self, Format};

/// A photo-like test card: gradients, edges, a little noise, colour.
fn card(w: u32, h: u32) -> RgbImage {
    let mut seed = 0x2545_f491u32;
    RgbImage::from_fn(w, h, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let noise = (seed % 17) as i32 - 8;
        let edge = if (x / 23 + y / 31) % 2 == 0 { 40 } else { 0 };
        let px = |v: i32| (v + noise).clamp(0, 255) as u8;
        image::Rgb([
            px((x * 255 / w) as i32 + edge),
            px((y * 255 / h) as i32),
            px(((x + y) * 127 / (w + h)) as i32 + 60 - edge),
        ])
    })
}

/// `image` as jpeg-encoder writes it: `sampling`, progressive or not, a
/// restart interval (0: none), `quality`.
fn jpeg_of(
    image: &RgbImage,
    sampling: SamplingFactor,
    progressive: bool,
    restart: u16,
    quality: u8,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = Encoder::new(&mut out, quality);
    e.set_sampling_factor(sampling);
    e.set_progressive(progressive);
    e.set_restart_interval(restart);
    e.encode(
        image.as_raw(),
        image.width() as u16,
        image.height() as u16,
        ColorType::Rgb,
    )
    .unwrap();
    out
}

fn decoded(bytes: &[u8]) -> RgbImage {
    image::load_from_memory_with_format(bytes, image::ImageFormat::Jpeg)
        .unwrap()
        .to_rgb8()
}

/// Peak signal-to-noise ratio of `b` against `a`, dB.
fn psnr(a: &RgbImage, b: &RgbImage) -> f64 {
    assert_eq!(a.dimensions(), b.dimensions());
    let se: f64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    10.0 * (255.0f64.powi(2) / (se / a.as_raw().len() as f64)).log10()
}

/// Both paths from the same file: (ours, pixels) as (PSNR against the
/// file's own pixels, bytes).
fn both(file: &[u8], quality: u8) -> ((f64, usize), (f64, usize)) {
    let source = decoded(file);
    let ours = recompress(file, quality).expect("the coefficient path takes this file");
    let theirs = format::encode(
        &DynamicImage::ImageRgb8(source.clone()),
        Format::Jpeg,
        Some(quality),
    )
    .unwrap();
    (
        (psnr(&source, &decoded(&ours)), ours.len()),
        (psnr(&source, &decoded(&theirs)), theirs.len()),
    )
}

/// The coefficient path's output of `file` at `quality` decodes at most
/// 0.5 dB further from the file's pixels than the pixel path's, and is at
/// most 5 % larger.
fn as_close_as_through_pixels(file: &[u8], quality: u8, what: &str) {
    let ((ours, ours_len), (theirs, theirs_len)) = both(file, quality);
    assert!(
        ours > theirs - 0.5,
        "{what}: {ours:.2} dB against the pixel path's {theirs:.2}"
    );
    assert!(
        ours_len as f64 <= theirs_len as f64 * 1.05,
        "{what}: {ours_len} bytes against the pixel path's {theirs_len}"
    );
}

/// Blocks that differ between two reads of the same image. Only the blocks
/// covering the image count: those past it (a whole MCU's padding) are
/// coded by interleaved scans only, and a progressive file's AC scans skip
/// them.
fn differing_blocks(want: &super::Frame, got: &super::Frame) -> usize {
    let mut differ = 0;
    for (a, b) in want.components.iter().zip(&got.components) {
        let (w, bw) = (a.coded_w, a.bw);
        let coded = (0..a.coded_h).flat_map(|y| (0..w).map(move |x| y * bw + x));
        differ += coded.filter(|&i| a.blocks[i] != b.blocks[i]).count();
    }
    differ
}

#[test]
fn every_layout_comes_out_as_close_as_through_pixels() {
    // Odd sizes: partial MCUs at the right and bottom edges.
    let image = card(203, 117);
    let layouts = [
        (SamplingFactor::F_1_1, false, 0),
        (SamplingFactor::F_2_1, false, 0),
        (SamplingFactor::F_2_2, false, 0),
        (SamplingFactor::F_1_2, false, 0),
        (SamplingFactor::F_2_2, false, 5),
        (SamplingFactor::F_1_1, true, 0),
        (SamplingFactor::F_2_1, true, 0),
        (SamplingFactor::F_2_2, true, 3),
    ];
    for (sampling, progressive, restart) in layouts {
        let file = jpeg_of(&image, sampling, progressive, restart, 92);
        for quality in [30, 75, 89] {
            let what =
                format!("{sampling:?} progressive={progressive} restart={restart} q{quality}");
            as_close_as_through_pixels(&file, quality, &what);
            let out = decoded(&recompress(&file, quality).unwrap());
            assert_eq!(out.dimensions(), image.dimensions(), "{what}");
        }
    }
}

#[test]
fn from_quality_90_chroma_is_kept_whole() {
    let image = card(64, 48);
    let whole = jpeg_of(&image, SamplingFactor::F_1_1, false, 0, 95);
    let ((ours, _), (theirs, _)) = both(&whole, 92);
    assert!(ours > theirs - 0.5, "{ours:.2} against {theirs:.2}");
    // Halved chroma would have to be doubled again: that is the pixel path's.
    let halved = jpeg_of(&image, SamplingFactor::F_2_2, false, 0, 95);
    assert!(recompress(&halved, 92).is_none());
    assert!(recompress(&halved, 75).is_some());
}

#[test]
fn grey_stays_one_channel() {
    let grey =
        image::GrayImage::from_fn(77, 50, |x, y| image::Luma([((x * 3 + y * 2) % 256) as u8]));
    let mut file = Vec::new();
    Encoder::new(&mut file, 90)
        .encode(grey.as_raw(), 77, 50, ColorType::Luma)
        .unwrap();
    let out = recompress(&file, 60).unwrap();
    let back = image::load_from_memory(&out).unwrap();
    assert_eq!(back.color(), image::ColorType::L8);
    assert_eq!((back.width(), back.height()), (77, 50));
}

#[test]
fn what_it_does_not_know_goes_through_pixels() {
    let image = card(40, 40);
    let cmyk: Vec<u8> = image
        .as_raw()
        .chunks(3)
        .flat_map(|p| [p[0], p[1], p[2], 0])
        .collect();
    let mut file = Vec::new();
    Encoder::new(&mut file, 90)
        .encode(&cmyk, 40, 40, ColorType::Cmyk)
        .unwrap();
    assert!(recompress(&file, 75).is_none(), "four components");
    assert!(recompress(b"not a jpeg at all", 75).is_none());
    assert!(
        recompress(&[0xFF, 0xD8, 0xFF, 0xD9], 75).is_none(),
        "no frame"
    );
}

#[test]
fn damaged_files_never_panic_and_cut_ones_are_refused() {
    let image = card(96, 80);
    for (sampling, progressive, restart) in [
        (SamplingFactor::F_2_2, false, 0),
        (SamplingFactor::F_2_2, true, 0),
        (SamplingFactor::F_1_1, false, 4),
    ] {
        let file = jpeg_of(&image, sampling, progressive, restart, 85);
        // Cut anywhere in the entropy-coded data: never a file that decodes
        // with made-up bits.
        for len in (file.len() / 2..file.len() - 2).step_by(7) {
            assert!(
                recompress(&file[..len], 75).is_none(),
                "cut at {len} of {}",
                file.len()
            );
        }
    }
    // Bytes changed, flipped, set to the values parsers trip on, or cut out,
    // half of them in the headers (libjpeg's progressive files too; this
    // test's build checks arithmetic overflow): an answer or `None`, never a
    // panic. 30,000 such files were run once before this was written.
    let mut files: Vec<Vec<u8>> = vec![
        include_bytes!("../../../../tests/fixtures/images/card-420-progressive.jpg").to_vec(),
        include_bytes!("../../../../tests/fixtures/images/card-444.jpg").to_vec(),
        include_bytes!("../../../../tests/fixtures/images/card-grey-progressive.jpg").to_vec(),
    ];
    let small = card(50, 37);
    files.push(jpeg_of(&small, SamplingFactor::F_2_1, true, 2, 80));
    files.push(jpeg_of(&small, SamplingFactor::F_1_2, false, 1, 80));
    let mut seed = 12345u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..1500 {
        let mut bad = files[i % files.len()].clone();
        for _ in 0..1 + next() % 6 {
            let at = if next() % 2 == 0 {
                next() % 700
            } else {
                next()
            } as usize
                % bad.len();
            match next() % 4 {
                0 => bad[at] = next() as u8,
                1 => bad[at] ^= 1 << (next() % 8),
                2 => bad[at] = [0, 0xFF, 0x7F, 0x80, 1][(next() % 5) as usize],
                _ => {
                    let end = (at + (next() % 16) as usize).min(bad.len());
                    bad.drain(at..end);
                }
            }
        }
        for quality in [1, 75, 95] {
            let _ = recompress(&bad, quality);
        }
    }
}

#[test]
fn progressive_and_restarts_read_as_the_baseline_file() {
    let image = card(203, 117);
    for sampling in [
        SamplingFactor::F_1_1,
        SamplingFactor::F_2_1,
        SamplingFactor::F_2_2,
    ] {
        let base = jpeg_of(&image, sampling, false, 0, 92);
        let want = super::read::read(&base).unwrap();
        for (progressive, restart) in [(false, 5), (true, 0), (true, 3), (true, 1)] {
            let file = jpeg_of(&image, sampling, progressive, restart, 92);
            let got = super::read::read(&file).unwrap();
            let differ = differing_blocks(&want, &got);
            assert_eq!(
                differ, 0,
                "{sampling:?} progressive={progressive} restart={restart}: {differ} blocks differ"
            );
        }
    }
}

/// libjpeg's own progressive files (successive approximation: DC and AC
/// first scans at a lower precision, then refining scans), from
/// tests/fixtures/images (CC0, see its LICENSE), read as its baseline ones.
#[test]
fn libjpeg_progressive_files_read_as_its_baseline_ones() {
    let fixtures: [(&[u8], &[u8]); 2] = [
        (
            include_bytes!("../../../../tests/fixtures/images/card-420.jpg"),
            include_bytes!("../../../../tests/fixtures/images/card-420-progressive.jpg"),
        ),
        (
            include_bytes!("../../../../tests/fixtures/images/card-444.jpg"),
            include_bytes!("../../../../tests/fixtures/images/card-444-progressive.jpg"),
        ),
    ];
    for (base, progressive) in fixtures {
        let (want, got) = (
            super::read::read(base).unwrap(),
            super::read::read(progressive).unwrap(),
        );
        assert_eq!(differing_blocks(&want, &got), 0);
        for quality in [40, 75] {
            as_close_as_through_pixels(progressive, quality, &format!("q{quality}"));
        }
    }
    let grey = include_bytes!("../../../../tests/fixtures/images/card-grey-progressive.jpg");
    let out = image::load_from_memory(&recompress(grey, 70).unwrap()).unwrap();
    let source = image::load_from_memory(grey).unwrap();
    assert_eq!(out.color(), image::ColorType::L8);
    let (a, b) = (source.to_rgb8(), out.to_rgb8());
    assert!(psnr(&a, &b) > 30.0, "{:.2} dB", psnr(&a, &b));
}

#[test]
fn nonzero_marks_exactly_the_non_zero_coefficients() {
    let mut seed = 99u32;
    for _ in 0..2000 {
        let block: super::Block = std::array::from_fn(|_| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            match seed >> 28 {
                0..=9 => 0,
                10 => i16::MIN,
                11 => -1,
                12 => 1,
                _ => (seed >> 8) as i16,
            }
        });
        let want = block
            .iter()
            .enumerate()
            .fold(0u64, |m, (k, &c)| m | u64::from(c != 0) << k);
        assert_eq!(super::nonzero(&block), want, "{block:?}");
    }
}

#[test]
fn a_large_frame_over_a_few_bytes_is_given_up_early() {
    // A 7000×7000 frame header (49 MP, within the pixel budget), then a scan
    // of ten bytes: the reader stops at the first row it runs out in.
    let small = jpeg_of(&card(16, 16), SamplingFactor::F_2_2, false, 0, 75);
    let sof = small.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    let sos = small.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
    let mut bomb = small.clone();
    bomb[sof + 5..sof + 9].copy_from_slice(&[0x1B, 0x58, 0x1B, 0x58]);
    let header_end = sos + 2 + usize::from(u16::from_be_bytes([small[sos + 2], small[sos + 3]]));
    bomb.truncate(header_end + 10);
    bomb.extend_from_slice(&[0xFF, 0xD9]);
    super::read::ROWS.with(|r| r.set(0));
    assert!(recompress(&bomb, 75).is_none());
    // The frame is 438 rows of MCUs; ten bytes last less than one.
    let rows = super::read::ROWS.with(|r| r.get());
    assert!(rows <= 2, "{rows} rows walked");
}
