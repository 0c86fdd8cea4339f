//! The four formats the plugin reads and writes, and how each is written.

use std::io::Cursor;

use image::codecs::gif::GifEncoder;
use image::codecs::png::PngEncoder;
use image::codecs::webp::WebPEncoder;
use image::{ColorType, DynamicImage, ImageFormat, Rgb, RgbImage};
use toolhost_sdk::{Deserialize, JsonSchema, Serialize, ToolError};

/// An image format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Png,
    #[serde(alias = "jpg")]
    Jpeg,
    Webp,
    Gif,
}

/// JPEG quality when none is asked for (`convert`, and the other tools when
/// they write JPEG).
pub const DEFAULT_JPEG_QUALITY: u8 = 90;

impl Format {
    pub fn from_image(f: ImageFormat) -> Option<Format> {
        match f {
            ImageFormat::Png => Some(Format::Png),
            ImageFormat::Jpeg => Some(Format::Jpeg),
            ImageFormat::WebP => Some(Format::Webp),
            ImageFormat::Gif => Some(Format::Gif),
            _ => None,
        }
    }

    pub fn to_image(self) -> ImageFormat {
        match self {
            Format::Png => ImageFormat::Png,
            Format::Jpeg => ImageFormat::Jpeg,
            Format::Webp => ImageFormat::WebP,
            Format::Gif => ImageFormat::Gif,
        }
    }

    /// The format a file name's extension names, if one of ours.
    pub fn from_path(path: &str) -> Option<Format> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "png" => Some(Format::Png),
            "jpg" | "jpeg" => Some(Format::Jpeg),
            "webp" => Some(Format::Webp),
            "gif" => Some(Format::Gif),
            _ => None,
        }
    }

    /// Lower-case name, as in the tools' answers.
    pub fn name(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Jpeg => "jpeg",
            Format::Webp => "webp",
            Format::Gif => "gif",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Jpeg => "jpg",
            other => other.name(),
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
            Format::Webp => "image/webp",
            Format::Gif => "image/gif",
        }
    }

    /// Largest width or height the format can hold.
    pub fn max_side(self) -> u32 {
        match self {
            Format::Png => u32::MAX,
            Format::Jpeg | Format::Gif => u16::MAX.into(),
            Format::Webp => 16383,
        }
    }
}

/// `image` as `format` (`quality` 1–100 for JPEG; WebP is written lossless,
/// the only WebP encoding the `image` crate has; GIF is quantised to 256
/// colours).
pub fn encode(
    image: &DynamicImage,
    format: Format,
    quality: Option<u8>,
) -> Result<Vec<u8>, ToolError> {
    let (w, h) = (image.width(), image.height());
    if w.max(h) > format.max_side() {
        return Err(ToolError::invalid_input(format!(
            "{}×{} is too large for {}: its sides are at most {} pixels",
            w,
            h,
            format.name(),
            format.max_side()
        )));
    }
    let mut out = Cursor::new(Vec::new());
    let written = match format {
        Format::Png => match image.color() {
            ColorType::L8
            | ColorType::La8
            | ColorType::Rgb8
            | ColorType::Rgba8
            | ColorType::L16
            | ColorType::La16
            | ColorType::Rgb16
            | ColorType::Rgba16 => image.write_with_encoder(PngEncoder::new(&mut out)),
            _ => DynamicImage::ImageRgba8(image.to_rgba8())
                .write_with_encoder(PngEncoder::new(&mut out)),
        },
        Format::Jpeg => {
            let q = quality.unwrap_or(DEFAULT_JPEG_QUALITY).clamp(1, 100);
            return jpeg(image, q);
        }
        Format::Webp => {
            let encoder = WebPEncoder::new_lossless(&mut out);
            if image.color().has_alpha() {
                DynamicImage::ImageRgba8(image.to_rgba8()).write_with_encoder(encoder)
            } else {
                DynamicImage::ImageRgb8(image.to_rgb8()).write_with_encoder(encoder)
            }
        }
        Format::Gif => {
            // Speed 10 of 1–30: NeuQuant at speed 1 takes minutes on a photo.
            let mut encoder = GifEncoder::new_with_speed(&mut out, 10);
            let rgba = image.to_rgba8();
            encoder.encode(rgba.as_raw(), w, h, ColorType::Rgba8.into())
        }
    };
    written.map_err(|e| ToolError::failed(format!("encoding {} failed: {e}", format.name())))?;
    Ok(out.into_inner())
}

/// JPEG by jpeg-encoder (baseline; chroma halved both ways below quality
/// 90, full from 90, as libjpeg and ImageMagick choose): grey images as one
/// channel, the rest as 8-bit RGB, transparent pixels composed over white.
fn jpeg(image: &DynamicImage, quality: u8) -> Result<Vec<u8>, ToolError> {
    use jpeg_encoder::{ColorType as Jpeg, Encoder};
    // `encode` checked the sides against `max_side` (65,535 for JPEG).
    let side = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
    let (w, h) = (side(image.width()), side(image.height()));
    let mut out = Vec::new();
    let encoder = Encoder::new(&mut out, quality);
    let written = match image {
        DynamicImage::ImageLuma8(grey) => encoder.encode(grey.as_raw(), w, h, Jpeg::Luma),
        DynamicImage::ImageRgb8(rgb) => encoder.encode(rgb.as_raw(), w, h, Jpeg::Rgb),
        DynamicImage::ImageLuma16(_) => encoder.encode(image.to_luma8().as_raw(), w, h, Jpeg::Luma),
        _ => encoder.encode(flatten(image).as_raw(), w, h, Jpeg::Rgb),
    };
    written.map_err(|e| ToolError::failed(format!("encoding jpeg failed: {e}")))?;
    Ok(out)
}

/// 8-bit RGB, transparent pixels composed over white (JPEG has no alpha).
fn flatten(image: &DynamicImage) -> RgbImage {
    if !image.color().has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let p = rgba.get_pixel(x, y).0;
        let a = u16::from(p[3]);
        let over = |c: u8| ((u16::from(c) * a + 255 * (255 - a) + 127) / 255) as u8;
        Rgb([over(p[0]), over(p[1]), over(p[2])])
    })
}
