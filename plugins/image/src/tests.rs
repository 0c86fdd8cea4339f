//! The tools on images made here (deterministic), natively, against a
//! temporary workspace.

use std::fs;
use std::path::Path;

use image::{DynamicImage, GenericImageView, Rgb, RgbImage, Rgba, RgbaImage};
use serde_json::Value;
use toolhost_sdk::{Content, ToolError};

use super::*;

/// A `w`×`h` RGB image whose pixel (x, y) is (x, y, x ^ y) (mod 256).
fn pattern(w: u32, h: u32) -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(w, h, |x, y| {
        Rgb([x as u8, y as u8, (x ^ y) as u8])
    }))
}

fn png(image: &DynamicImage) -> Vec<u8> {
    format::encode(image, Format::Png, None).unwrap()
}

/// A workspace holding `photo.png` (a 64×48 pattern).
fn workspace() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("photo.png"), png(&pattern(64, 48))).unwrap();
    root
}

fn input<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The JSON item and the image item of an answer; the image is also the
/// file written at `output_path`.
fn answer(root: &Path, contents: Vec<Content>) -> (Value, DynamicImage) {
    let [Content::Json(j), Content::Binary(b)] = &contents[..] else {
        panic!("want [json, binary], got {} items", contents.len());
    };
    let v: Value = serde_json::from_str(j).unwrap();
    assert_eq!(b.media_type, v["media_type"], "{v}");
    assert_eq!(b.data.len() as u64, v["bytes"].as_u64().unwrap());
    let file = fs::read(root.join(v["output_path"].as_str().unwrap())).unwrap();
    assert_eq!(file, b.data, "the workspace file is the image answered");
    let decoded = decode::decode(&b.data).unwrap();
    assert_eq!(decoded.format.name(), v["format"]);
    assert_eq!(
        (decoded.image.width() as u64, decoded.image.height() as u64),
        (v["width"].as_u64().unwrap(), v["height"].as_u64().unwrap())
    );
    (v, decoded.image)
}

fn invalid(r: Result<Vec<Content>, ToolError>) -> String {
    match r {
        Err(ToolError::InvalidInput(m)) => m,
        Err(other) => panic!("want invalid_input, got {other:?}"),
        Ok(_) => panic!("want invalid_input, got an answer"),
    }
}

/// PNG bytes with an IHDR declaring `w`×`h` (8-bit RGBA), correct CRC, and
/// a tiny IDAT: what a decompression bomb looks like from outside.
pub fn png_header(w: u32, h: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend(w.to_be_bytes());
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    // zlib of a few zero bytes (stored block).
    chunk(
        &mut out,
        b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff, 0, 0, 0, 0, 0, 0x04, 0, 0x01,
        ],
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

#[test]
fn info_reads_the_header() {
    let root = workspace();
    let i = info_in(root.path(), &input(json!({"path": "photo.png"}))).unwrap();
    assert_eq!((i.format, i.width, i.height), (Format::Png, 64, 48));
    assert_eq!((i.color.as_str(), i.has_alpha), ("rgb8", false));
    assert_eq!(i.path.as_deref(), Some("photo.png"));
    assert_eq!(
        i.bytes as u64,
        fs::metadata(root.path().join("photo.png")).unwrap().len()
    );
    let err = info_in(
        root.path(),
        &input(json!({"path": "photo.png", "base64": "AA=="})),
    )
    .unwrap_err();
    assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("exactly one")));
}

#[test]
fn resize_keeps_the_aspect_and_writes_beside_the_input() {
    let root = workspace();
    let out = resize_in(
        root.path(),
        input(json!({"path": "photo.png", "width": 32})),
    )
    .unwrap();
    let (v, img) = answer(root.path(), out);
    assert_eq!((img.width(), img.height()), (32, 24));
    assert_eq!(v["output_path"], "photo.resize.png");
    assert_eq!(v["source"]["width"], 64);
    // Exact size, JPEG chosen by the output's name.
    let out = resize_in(
        root.path(),
        input(json!({"path": "photo.png", "width": 10, "height": 30, "keep_aspect": false, "output": "small/x.jpg", "filter": "triangle"})),
    )
    .unwrap();
    let (v, img) = answer(root.path(), out);
    assert_eq!(
        (img.width(), img.height(), &v["format"]),
        (10, 30, &json!("jpeg"))
    );
    assert_eq!(v["output_path"], "small/x.jpg");
    let m = invalid(resize_in(root.path(), input(json!({"path": "photo.png"}))));
    assert!(m.contains("`width`"), "{m}");
    let m = invalid(resize_in(
        root.path(),
        input(json!({"path": "photo.png", "scale": 1000})),
    ));
    assert!(m.contains("megapixels"), "{m}");
    let m = invalid(resize_in(
        root.path(),
        input(json!({"path": "photo.png", "width": 8, "output": "a.png", "format": "gif"})),
    ));
    assert!(m.contains("`format` is gif"), "{m}");
}

#[test]
fn crop_takes_the_pixels_of_the_box() {
    let root = workspace();
    let out = crop_in(
        root.path(),
        input(json!({"path": "photo.png", "x": 10, "y": 5, "width": 20, "height": 100})),
    )
    .unwrap();
    let (v, img) = answer(root.path(), out);
    assert_eq!(
        v["box"],
        json!({"x": 10, "y": 5, "width": 20, "height": 43})
    );
    assert_eq!((img.width(), img.height()), (20, 43));
    assert_eq!(img.get_pixel(0, 0), Rgba([10, 5, 10 ^ 5, 255]));
    assert_eq!(img.get_pixel(19, 42), Rgba([29, 47, 29 ^ 47, 255]));
    let m = invalid(crop_in(
        root.path(),
        input(json!({"path": "photo.png", "x": 64, "y": 0, "width": 1, "height": 1})),
    ));
    assert!(m.contains("outside the 64×48 image"), "{m}");
}

#[test]
fn zoom_in_crops_a_relative_box_and_scales_it_up() {
    let root = workspace();
    let out = zoom_in_in(
        root.path(),
        input(json!({"path": "photo.png", "bbox_2d": [500, 500, 1000, 1000], "label": "corner"})),
    )
    .unwrap();
    let (v, img) = answer(root.path(), out);
    // The bottom-right quarter is 32×24 pixels: 24 is under the 32-pixel
    // minimum, so the box grows upwards to 32×32 (held at the bottom edge),
    // then scales to 512×512.
    assert_eq!(v["box"], json!([32, 16, 64, 48]));
    assert_eq!(
        (v["label"].as_str(), v["coordinates"].as_str()),
        (Some("corner"), Some("relative"))
    );
    assert_eq!((img.width(), img.height()), (512, 512));
    assert_eq!(v["output_path"], "photo.zoom.png");
    // The top-left pixel of the zoom is the box's top-left pixel.
    let Rgba([r, g, _, _]) = img.get_pixel(0, 0);
    assert!(r.abs_diff(32) <= 1 && g.abs_diff(16) <= 1, "{r} {g}");
    // Pixel coordinates, Qwen's `bbox` spelling too.
    let out = zoom_in_in(
        root.path(),
        input(json!({"path": "photo.png", "bbox": [0, 0, 16, 16], "coordinates": "pixels", "output": "z.webp"})),
    )
    .unwrap();
    let (v, _) = answer(root.path(), out);
    // Grown to the 32-pixel minimum (the image is 48 tall, so it fits).
    assert_eq!(
        (&v["box"], &v["format"]),
        (&json!([0, 0, 32, 32]), &json!("webp"))
    );
    let m = invalid(zoom_in_in(
        root.path(),
        input(json!({"path": "photo.png", "bbox_2d": [10, 10, 5, 5]})),
    ));
    assert!(m.contains("x1 < x2"), "{m}");
}

#[test]
fn rotate_turns_clockwise_and_flips() {
    let root = workspace();
    let out = rotate_in(
        root.path(),
        input(json!({"path": "photo.png", "degrees": 90})),
    )
    .unwrap();
    let (v, img) = answer(root.path(), out);
    assert_eq!(
        (img.width(), img.height(), &v["degrees"]),
        (48, 64, &json!(90))
    );
    // Clockwise: the old top-left corner is now top-right.
    assert_eq!(img.get_pixel(47, 0), Rgba([0, 0, 0, 255]));
    assert_eq!(img.get_pixel(0, 0), Rgba([0, 47, 47, 255]));
    let out = rotate_in(
        root.path(),
        input(json!({"path": "photo.png", "degrees": -180, "flip": "horizontal"})),
    )
    .unwrap();
    let (v, img) = answer(root.path(), out);
    // 180° then a left-right mirror is a top-bottom mirror.
    assert_eq!((img.width(), &v["degrees"]), (64, &json!(180)));
    assert_eq!(img.get_pixel(0, 0), Rgba([0, 47, 47, 255]));
    let m = invalid(rotate_in(
        root.path(),
        input(json!({"path": "photo.png", "degrees": 45})),
    ));
    assert!(m.contains("multiple of 90"), "{m}");
}

#[test]
fn convert_writes_every_format() {
    let root = workspace();
    // Half-transparent pixels: JPEG gets them over white.
    let rgba = DynamicImage::ImageRgba8(RgbaImage::from_pixel(8, 8, Rgba([0, 0, 0, 0])));
    fs::write(root.path().join("clear.png"), png(&rgba)).unwrap();
    for (fmt, ext) in [
        ("png", "png"),
        ("jpeg", "jpg"),
        ("jpg", "jpg"),
        ("webp", "webp"),
        ("gif", "gif"),
    ] {
        let out = convert_in(
            root.path(),
            input(json!({"path": "photo.png", "format": fmt})),
        )
        .unwrap();
        let (v, img) = answer(root.path(), out);
        assert_eq!(v["output_path"], format!("photo.convert.{ext}"));
        assert_eq!((img.width(), img.height()), (64, 48));
        if fmt == "png" || fmt == "webp" {
            assert_eq!(
                img.to_rgb8(),
                pattern(64, 48).to_rgb8(),
                "{fmt} is lossless"
            );
        }
    }
    let out = convert_in(
        root.path(),
        input(json!({"path": "clear.png", "format": "jpeg"})),
    )
    .unwrap();
    let (_, img) = answer(root.path(), out);
    assert_eq!(img.get_pixel(4, 4), Rgba([255, 255, 255, 255]));
    let err = serde_json::from_value::<ConvertInput>(json!({"path": "a", "format": "bmp"}));
    assert!(err.is_err());
}

#[test]
fn compress_answers_seed_004s_fields() {
    let root = workspace();
    let big = pattern(400, 300);
    fs::write(root.path().join("big.png"), png(&big)).unwrap();
    let original = fs::metadata(root.path().join("big.png")).unwrap().len();
    let out = compress_in(
        root.path(),
        input(json!({"path": "big.png", "quality": 50})),
    )
    .unwrap();
    let (v, _) = answer(root.path(), out);
    assert_eq!(v["original_size"], original);
    assert_eq!(v["output_path"], "big.compressed.jpg");
    let compressed = fs::metadata(root.path().join("big.compressed.jpg"))
        .unwrap()
        .len();
    assert_eq!(v["compressed_size"], compressed);
    let ratio = v["compression_ratio"].as_f64().unwrap();
    assert!(
        (ratio - original as f64 / compressed as f64).abs() < 0.001,
        "{v}"
    );
    assert!(ratio > 1.0, "a lossy JPEG of a PNG is smaller: {v}");
    // Lower quality, fewer bytes.
    let out = compress_in(
        root.path(),
        input(json!({"path": "big.png", "quality": 10, "output": "q10.jpg"})),
    )
    .unwrap();
    let (low, _) = answer(root.path(), out);
    assert!(
        low["compressed_size"].as_u64() < v["compressed_size"].as_u64(),
        "{low} {v}"
    );
    // WebP is lossless: no quality.
    let out = compress_in(
        root.path(),
        input(json!({"path": "big.png", "format": "webp"})),
    )
    .unwrap();
    let (v, _) = answer(root.path(), out);
    assert_eq!(
        (&v["lossless"], &v["quality"]),
        (&json!(true), &Value::Null)
    );
    let m = invalid(compress_in(
        root.path(),
        input(json!({"path": "big.png", "format": "png"})),
    ));
    assert!(m.contains("jpeg or webp"), "{m}");
}

#[test]
fn base64_input_lands_under_images() {
    use base64::Engine;
    let root = tempfile::tempdir().unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(png(&pattern(20, 10)));
    let out = rotate_in(root.path(), input(json!({"base64": b64, "degrees": 270}))).unwrap();
    let (v, img) = answer(root.path(), out);
    assert_eq!((img.width(), img.height()), (10, 20));
    let path = v["output_path"].as_str().unwrap();
    assert!(
        path.starts_with("images/rotate-") && path.ends_with(".png"),
        "{path}"
    );
    assert_eq!(v["source"]["path"], Value::Null);
}

#[test]
fn decompression_bombs_are_refused_from_the_header() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("bomb.png"), png_header(100_000, 100_000)).unwrap();
    let m = invalid(resize_in(
        root.path(),
        input(json!({"path": "bomb.png", "width": 10})),
    ));
    assert!(
        m.contains("100000×100000") && m.contains("refused before decoding"),
        "{m}"
    );
    let err = info_in(root.path(), &input(json!({"path": "bomb.png"}))).unwrap_err();
    assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("100000×100000")));
    // Just under the budget in pixels, but 8000×6000 RGBA is 183 MiB of
    // pixels: allowed to start, then the tiny IDAT is found short.
    fs::write(root.path().join("ok.png"), png_header(8000, 6000)).unwrap();
    let m = invalid(convert_in(
        root.path(),
        input(json!({"path": "ok.png", "format": "jpeg"})),
    ));
    assert!(m.contains("malformed or truncated"), "{m}");
    // A GIF whose screen declares 65535×65535.
    let mut gif = b"GIF89a\xff\xff\xff\xff\x00\x00\x00".to_vec();
    gif.extend(b",\x00\x00\x00\x00\xff\xff\xff\xff\x00\x02\x02\x44\x01\x00;");
    fs::write(root.path().join("bomb.gif"), gif).unwrap();
    let m = invalid(crop_in(
        root.path(),
        input(json!({"path": "bomb.gif", "x": 0, "y": 0, "width": 1, "height": 1})),
    ));
    assert!(m.contains("65535×65535"), "{m}");
}

#[test]
fn broken_images_are_the_callers_error() {
    let root = tempfile::tempdir().unwrap();
    let good = png(&pattern(64, 48));
    fs::write(root.path().join("cut.png"), &good[..good.len() / 2]).unwrap();
    let m = invalid(crop_in(
        root.path(),
        input(json!({"path": "cut.png", "x": 0, "y": 0, "width": 4, "height": 4})),
    ));
    assert!(
        m.contains("png image") && (m.contains("truncated") || m.contains("malformed")),
        "{m}"
    );
    fs::write(root.path().join("notes.png"), b"hello, world").unwrap();
    let m = invalid(convert_in(
        root.path(),
        input(json!({"path": "notes.png", "format": "png"})),
    ));
    assert!(m.contains("not an image in a supported format"), "{m}");
    fs::write(root.path().join("empty.png"), b"").unwrap();
    let m = invalid(convert_in(
        root.path(),
        input(json!({"path": "empty.png", "format": "png"})),
    ));
    assert!(m.contains("empty"), "{m}");
    // A JPEG cut after its header.
    let jpeg = format::encode(&pattern(64, 48), Format::Jpeg, None).unwrap();
    fs::write(root.path().join("cut.jpg"), &jpeg[..jpeg.len() / 3]).unwrap();
    let r = rotate_in(
        root.path(),
        input(json!({"path": "cut.jpg", "degrees": 90})),
    );
    // zune-jpeg fills a cut scan with grey rather than failing; either way
    // the call ends cleanly.
    if let Err(e) = r {
        assert!(matches!(e, ToolError::InvalidInput(_)), "{e:?}");
    }
    let m = invalid(rotate_in(
        root.path(),
        input(json!({"path": "../x.png", "degrees": 90})),
    ));
    assert!(m.contains("not a workspace path"), "{m}");
}

#[test]
fn large_results_are_written_but_not_inlined() {
    let root = tempfile::tempdir().unwrap();
    // Noise does not compress: 1800×1800 RGB is ~9.7 MB as PNG.
    let mut seed = 1u32;
    let noise = DynamicImage::ImageRgb8(RgbImage::from_fn(1800, 1800, |_, _| {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let [a, b, c, _] = seed.to_le_bytes();
        Rgb([a, b, c])
    }));
    fs::write(root.path().join("noise.png"), png(&noise)).unwrap();
    let out = rotate_in(
        root.path(),
        input(json!({"path": "noise.png", "degrees": 180})),
    )
    .unwrap();
    let [Content::Json(j)] = &out[..] else {
        panic!("want only the JSON item");
    };
    let v: Value = serde_json::from_str(j).unwrap();
    assert_eq!(v["inline"], false);
    let written = fs::metadata(root.path().join("noise.rotate.png"))
        .unwrap()
        .len();
    assert!(
        written as usize > MAX_INLINE && v["bytes"] == written,
        "{v}"
    );
}

#[test]
fn jpeg_keeps_the_picture_and_grey_stays_grey() {
    // A smooth picture at quality 90 comes back within a few levels on
    // average (a broken encoder, wrong channel order or chroma, would not).
    let smooth = DynamicImage::ImageRgb8(RgbImage::from_fn(160, 120, |x, y| {
        Rgb([(x * 255 / 160) as u8, (y * 255 / 120) as u8, 128])
    }));
    let bytes = format::encode(&smooth, Format::Jpeg, Some(90)).unwrap();
    let back = decode::decode(&bytes).unwrap().image.to_rgb8();
    let diff: u64 = back
        .as_raw()
        .iter()
        .zip(smooth.to_rgb8().as_raw())
        .map(|(a, b)| u64::from(a.abs_diff(*b)))
        .sum();
    let mean = diff as f64 / back.as_raw().len() as f64;
    assert!(mean < 2.0, "mean difference {mean}");
    let grey = DynamicImage::ImageLuma8(image::GrayImage::from_fn(64, 64, |x, _| {
        image::Luma([x as u8 * 4])
    }));
    let bytes = format::encode(&grey, Format::Jpeg, Some(75)).unwrap();
    let back = decode::decode(&bytes).unwrap().image;
    assert_eq!(back.color(), image::ColorType::L8, "one channel written");
    let deep = DynamicImage::ImageLuma16(grey.to_luma16());
    let bytes = format::encode(&deep, Format::Jpeg, Some(75)).unwrap();
    assert_eq!(
        decode::decode(&bytes).unwrap().image.color(),
        image::ColorType::L8
    );
}
