//! Untrusted bytes to pixels, guarded: the format is sniffed from the bytes,
//! the declared dimensions are read from the header and checked against the
//! pixel budget *before* any pixel buffer is allocated, and the decoder runs
//! under an allocation cap. Everything wrong with the bytes is the caller's
//! error (`invalid_input`) with a message that says what was wrong.

use std::io::Cursor;

use image::{
    ColorType, DynamicImage, ImageDecoder, ImageError, ImageReader, Limits, error::LimitErrorKind,
    metadata::Orientation,
};
use toolhost_sdk::ToolError;

use crate::format::Format;

/// Most pixels an image may declare (50 megapixels: 200 MB as 8-bit RGBA).
/// Past it the call is refused from the header alone: a decompression bomb
/// (a few KB declaring 100000×100000) never reaches a decoder's allocator.
pub const MAX_PIXELS: u64 = 50_000_000;
/// Most bytes a decoder may allocate (the output buffer included): 256 MiB,
/// so a 50-megapixel 16-bit image is refused too.
pub const MAX_ALLOC: u64 = 256 << 20;

/// What the header says, read without decoding pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format: Format,
    pub width: u32,
    pub height: u32,
    pub color: ColorType,
    /// No EXIF orientation turns it (or none could be read, as `decode`
    /// takes it).
    pub upright: bool,
}

/// A decoded image and what it came from.
pub struct Decoded {
    pub image: DynamicImage,
    pub format: Format,
    /// Size of the encoded input, bytes.
    pub bytes: usize,
}

/// The format of `bytes`, from their signature (never from a file name).
pub fn sniff(bytes: &[u8]) -> Result<Format, ToolError> {
    if bytes.is_empty() {
        return Err(ToolError::invalid_input("the image is empty (0 bytes)"));
    }
    image::guess_format(bytes)
        .ok()
        .and_then(Format::from_image)
        .ok_or_else(|| {
            let head: String = bytes
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            ToolError::invalid_input(format!(
                "not an image in a supported format (PNG, JPEG, WebP, GIF): it starts with {head}"
            ))
        })
}

/// Width and height a PNG's IHDR declares, read straight from the bytes:
/// the PNG decoder itself refuses to start on an image whose buffer size
/// does not fit in memory, so the check has to look first to name the size.
pub fn png_declared(bytes: &[u8]) -> Option<(u32, u32)> {
    let ihdr = bytes.get(8..24)?;
    if &ihdr[4..8] != b"IHDR" {
        return None;
    }
    let word = |i: usize| u32::from_be_bytes([ihdr[i], ihdr[i + 1], ihdr[i + 2], ihdr[i + 3]]);
    Some((word(8), word(12)))
}

/// Refuse `width`×`height` over the pixel budget.
pub fn check_budget(width: u32, height: u32) -> Result<(), ToolError> {
    let pixels = u64::from(width) * u64::from(height);
    if pixels > MAX_PIXELS {
        return Err(ToolError::invalid_input(format!(
            "the image declares {width}×{height} pixels ({:.1} megapixels); this plugin \
             decodes at most {} megapixels, so it was refused before decoding \
             (a decompression-bomb guard)",
            pixels as f64 / 1e6,
            MAX_PIXELS / 1_000_000
        )));
    }
    if width == 0 || height == 0 {
        return Err(ToolError::invalid_input(format!(
            "the image declares {width}×{height} pixels: it has no pixels"
        )));
    }
    Ok(())
}

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_ALLOC);
    limits
}

/// A decoder for `bytes`, its header checked against the budget.
fn decoder(bytes: &[u8]) -> Result<(Format, impl ImageDecoder + '_), ToolError> {
    let format = sniff(bytes)?;
    if format == Format::Png
        && let Some((w, h)) = png_declared(bytes)
    {
        check_budget(w, h)?;
    }
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format.to_image());
    reader.limits(limits());
    let decoder = reader.into_decoder().map_err(|e| decode_error(format, e))?;
    let (w, h) = decoder.dimensions();
    check_budget(w, h)?;
    Ok((format, decoder))
}

/// The header of `bytes`: format, dimensions and colour type, no pixels
/// decoded (a truncated body goes unnoticed here).
pub fn header(bytes: &[u8]) -> Result<Header, ToolError> {
    let (format, mut decoder) = decoder(bytes)?;
    let (width, height) = decoder.dimensions();
    let upright = decoder
        .orientation()
        .map_or(true, |o| o == Orientation::NoTransforms);
    Ok(Header {
        format,
        width,
        height,
        color: decoder.color_type(),
        upright,
    })
}

/// Decode `bytes` (only the first frame of an animation), turned upright by
/// its EXIF orientation, within the pixel budget and the allocation cap.
pub fn decode(bytes: &[u8]) -> Result<Decoded, ToolError> {
    let (format, mut decoder) = decoder(bytes)?;
    if decoder.total_bytes() > MAX_ALLOC {
        return Err(ToolError::invalid_input(format!(
            "decoding this image needs {} MiB; this plugin allows {} MiB",
            decoder.total_bytes() >> 20,
            MAX_ALLOC >> 20
        )));
    }
    // A broken EXIF block only loses the orientation, not the image.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(|e| decode_error(format, e))?;
    image.apply_orientation(orientation);
    Ok(Decoded {
        image,
        format,
        bytes: bytes.len(),
    })
}

/// A decoder's error as the caller should read it.
fn decode_error(format: Format, e: ImageError) -> ToolError {
    let name = format.name();
    match e {
        ImageError::Decoding(e) => {
            ToolError::invalid_input(format!("the {name} image is malformed or truncated: {e}"))
        }
        ImageError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            ToolError::invalid_input(format!("the {name} image is truncated"))
        }
        ImageError::IoError(e) => {
            ToolError::invalid_input(format!("the {name} image cannot be read: {e}"))
        }
        ImageError::Limits(l) => match l.kind() {
            LimitErrorKind::DimensionError => ToolError::invalid_input(format!(
                "the {name} image's declared dimensions are too large to decode"
            )),
            _ => ToolError::invalid_input(format!(
                "decoding this {name} image needs more memory than this plugin allows \
                 ({} MiB)",
                MAX_ALLOC >> 20
            )),
        },
        ImageError::Unsupported(e) => {
            ToolError::invalid_input(format!("this {name} image is not supported: {e}"))
        }
        other => ToolError::failed(format!("decoding the {name} image failed: {other}")),
    }
}
