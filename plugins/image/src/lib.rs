//! `image`: look at and change images inside the sandbox (pure-Rust codecs
//! of the `image` crate: PNG, JPEG, WebP, GIF).
//!
//! Tools (seen by agents as `image_<name>`), each taking the image as exactly
//! one of `path` (a session workspace file), `url` (through wasi:http and the
//! manifest's `[http] allow`) or `base64`:
//!
//! - `info`: format, size, colour type, read from the header only;
//! - `resize {width?, height?, scale?, keep_aspect?, filter?}`;
//! - `crop {x, y, width, height}` in pixels;
//! - `zoom_in {bbox_2d, label?, coordinates?}`: Qwen-Agent's
//!   `image_zoom_in_tool`: a region in 0–1000 relative coordinates (or
//!   pixels), grown to 32 px when smaller, scaled to 512×512–2048×2048;
//! - `rotate {degrees, flip?}`: clockwise by a multiple of 90°, lossless;
//! - `convert {format, quality?}`;
//! - `compress {quality?, format?}`: seed 004's answer (`original_size`,
//!   `compressed_size`, `compression_ratio`, `output_path`); JPEG to JPEG is
//!   written from the file's DCT coefficients where it can be ([`jpeg`]).
//!
//! Every tool but `info` answers a JSON item describing the result and the
//! result itself as an image item, and writes it into the workspace
//! (`output`, else a name derived from the input's). Untrusted bytes are
//! parsed only here, in the sandbox: the declared size is checked against
//! [`decode::MAX_PIXELS`] before decoding, and what the decoder refuses is
//! the caller's error (422), never the host's.

pub mod decode;
pub mod format;
pub mod geometry;
pub mod jpeg;
pub mod resample;
pub mod source;

use std::borrow::Cow;
use std::path::Path;

use image::DynamicImage;
use serde_json::{Value, json};
use toolhost_sdk::{Content, Deserialize, Json, JsonSchema, Serialize, ToolError, host};

use decode::Decoded;
use format::Format;
use geometry::Coordinates;
pub use resample::Filter;
use source::Source;

/// Where the host mounts the session workspace inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// Results larger than this are written to the workspace but not returned
/// inline (the JSON item says so): 8 MiB.
pub const MAX_INLINE: usize = 8 << 20;

/// Declares a tool's input: the three image sources, then its own fields.
macro_rules! image_input {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// The image as a file of the session workspace, e.g. `photos/cat.jpg`.
            pub path: Option<String>,
            /// The image at an http(s) URL (only hosts the plugin's manifest allows).
            pub url: Option<String>,
            /// The image's bytes in base64 (a `data:image/...;base64,` URL too).
            pub base64: Option<String>,
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            fn source(&self) -> Result<Source<'_>, ToolError> {
                Source::one_of(self.path.as_deref(), self.url.as_deref(), self.base64.as_deref())
            }
        }
    };
}

image_input!(InfoInput {});

image_input!(ResizeInput {
    /// New width in pixels (alone: the height follows the aspect ratio).
    #[schemars(range(min = 1, max = 65535))]
    width: Option<u32>,
    /// New height in pixels (alone: the width follows the aspect ratio).
    #[schemars(range(min = 1, max = 65535))]
    height: Option<u32>,
    /// Scale factor instead of a size, e.g. 0.5.
    scale: Option<f64>,
    /// With both `width` and `height`: fit inside them keeping the aspect
    /// ratio (true, the default) or stretch to exactly that size (false).
    keep_aspect: Option<bool>,
    /// Resampling filter (default lanczos3).
    filter: Option<Filter>,
    /// Output format (default: the output path's extension, else the input's).
    format: Option<Format>,
    /// JPEG quality 1–100 (default 90).
    #[schemars(range(min = 1, max = 100))]
    quality: Option<u8>,
    /// Workspace path of the result (default `<stem>.resize.<ext>` beside the input).
    output: Option<String>,
});

image_input!(CropInput {
    /// Left edge, pixels from the left.
    x: u32,
    /// Top edge, pixels from the top.
    y: u32,
    /// Width in pixels (cut at the image's right edge).
    #[schemars(range(min = 1))]
    width: u32,
    /// Height in pixels (cut at the image's bottom edge).
    #[schemars(range(min = 1))]
    height: u32,
    /// Output format (default: the output path's extension, else the input's).
    format: Option<Format>,
    /// JPEG quality 1–100 (default 90).
    #[schemars(range(min = 1, max = 100))]
    quality: Option<u8>,
    /// Workspace path of the result (default `<stem>.crop.<ext>` beside the input).
    output: Option<String>,
});

image_input!(ZoomInput {
    /// The region as [x1, y1, x2, y2]: top-left and bottom-right corners, in
    /// 0–1000 relative coordinates by default (Qwen-VL's grounding boxes).
    #[serde(alias = "bbox")]
    bbox_2d: [f64; 4],
    /// What is in the box (echoed in the answer).
    label: Option<String>,
    /// `relative` (0–1000 on each axis, the default) or `pixels`.
    coordinates: Option<Coordinates>,
    /// Output format (default png).
    format: Option<Format>,
    /// Workspace path of the result (default `<stem>.zoom.png` beside the input).
    output: Option<String>,
});

image_input!(RotateInput {
    /// Clockwise rotation: 0, 90, 180 or 270 (negative: counter-clockwise).
    degrees: i32,
    /// Mirror after rotating: `horizontal` (left-right) or `vertical` (top-bottom).
    flip: Option<Flip>,
    /// Output format (default: the output path's extension, else the input's).
    format: Option<Format>,
    /// JPEG quality 1–100 (default 90).
    #[schemars(range(min = 1, max = 100))]
    quality: Option<u8>,
    /// Workspace path of the result (default `<stem>.rotate.<ext>` beside the input).
    output: Option<String>,
});

image_input!(ConvertInput {
    /// The format to write: png, jpeg, webp (lossless) or gif (256 colours).
    format: Format,
    /// JPEG quality 1–100 (default 90).
    #[schemars(range(min = 1, max = 100))]
    quality: Option<u8>,
    /// Workspace path of the result (default `<stem>.convert.<ext>` beside the input).
    output: Option<String>,
});

image_input!(CompressInput {
    /// JPEG quality from 1 (smallest) to 100 (best); default 75.
    #[schemars(range(min = 1, max = 100))]
    quality: Option<u8>,
    /// jpeg (lossy, the default) or webp (lossless: `quality` does not apply).
    format: Option<Format>,
    /// Workspace path of the result (default `<stem>.compressed.<ext>` beside the input).
    output: Option<String>,
});

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Flip {
    Horizontal,
    Vertical,
}

/// `info`'s answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Info {
    pub format: Format,
    pub media_type: String,
    pub width: u32,
    pub height: u32,
    pub megapixels: f64,
    /// The colour type as stored, e.g. `rgb8`, `rgba8`, `l16`.
    pub color: String,
    pub has_alpha: bool,
    /// Size of the encoded image, bytes.
    pub bytes: usize,
    /// The workspace file read, if the image was one.
    pub path: Option<String>,
}

pub fn info_in(root: &Path, input: &InfoInput) -> Result<Info, ToolError> {
    let loaded = source::load(root, input.source()?)?;
    let h = decode::header(&loaded.bytes)?;
    Ok(Info {
        format: h.format,
        media_type: h.format.media_type().to_owned(),
        width: h.width,
        height: h.height,
        megapixels: (f64::from(h.width) * f64::from(h.height) / 1e4).round() / 100.0,
        color: format!("{:?}", h.color).to_ascii_lowercase(),
        has_alpha: h.color.has_alpha(),
        bytes: loaded.bytes.len(),
        path: loaded.path,
    })
}

/// A finished operation: the image made, how it is written, and what the
/// answer adds about it.
struct Made<'a> {
    out: Out<'a>,
    op: &'static str,
    format: Format,
    quality: Option<u8>,
    output: Option<String>,
    extra: Value,
}

/// What an operation made: pixels still to encode, or the file already
/// written as `format` (compress measures it first).
enum Out<'a> {
    Pixels(Cow<'a, DynamicImage>),
    Encoded {
        bytes: Vec<u8>,
        width: u32,
        height: u32,
    },
}

/// The image a tool read, as its answer describes it.
struct Shape {
    width: u32,
    height: u32,
    format: Format,
    bytes: usize,
}

impl Shape {
    fn of(decoded: &Decoded) -> Shape {
        Shape {
            width: decoded.image.width(),
            height: decoded.image.height(),
            format: decoded.format,
            bytes: decoded.bytes,
        }
    }
}

/// The output format: the one asked for, else the `output` path's
/// extension, else `fallback`; a mismatch between the two is refused.
fn out_format(
    asked: Option<Format>,
    output: Option<&str>,
    fallback: Format,
) -> Result<Format, ToolError> {
    let by_name = output.and_then(Format::from_path);
    match (asked, by_name) {
        (Some(a), Some(b)) if a != b => Err(ToolError::invalid_input(format!(
            "`output` names a .{} file but `format` is {}",
            b.extension(),
            a.name()
        ))),
        (Some(a), _) => Ok(a),
        (None, Some(b)) => Ok(b),
        (None, None) => Ok(fallback),
    }
}

/// Encode `made`, write it into the workspace and answer
/// `[json description, image]`.
fn finish(
    root: &Path,
    input: source::Input,
    source: Shape,
    made: Made<'_>,
) -> Result<Vec<Content>, ToolError> {
    let (bytes, w, h) = match made.out {
        Out::Encoded {
            bytes,
            width,
            height,
        } => (bytes, width, height),
        Out::Pixels(image) => {
            let (w, h) = (image.width(), image.height());
            host::progress(
                &format!("encoding {w}×{h} {}", made.format.name()),
                None,
                None,
            );
            (format::encode(&image, made.format, made.quality)?, w, h)
        }
    };
    let output = match made.output.as_deref() {
        Some(o) => source::relative(o)?,
        None => source::default_output(input.path.as_deref(), made.op, made.format, &bytes),
    };
    source::write(root, &output, &bytes)?;
    let inline = bytes.len() <= MAX_INLINE;
    let mut answer = json!({
        "width": w,
        "height": h,
        "format": made.format.name(),
        "media_type": made.format.media_type(),
        "bytes": bytes.len(),
        "output_path": output,
        "inline": inline,
        "source": {
            "width": source.width,
            "height": source.height,
            "format": source.format.name(),
            "bytes": source.bytes,
            "path": input.path,
        },
    });
    if let (Value::Object(a), Value::Object(extra)) = (&mut answer, made.extra) {
        a.extend(extra);
    }
    let mut contents = vec![toolhost_sdk::json(&answer)?];
    if inline {
        contents.push(toolhost_sdk::binary(made.format.media_type(), bytes));
    }
    Ok(contents)
}

/// Load and decode the image an input names.
fn open(root: &Path, source: Source<'_>) -> Result<(source::Input, Decoded), ToolError> {
    let input = source::load(root, source)?;
    let decoded = decode::decode(&input.bytes)?;
    Ok((input, decoded))
}

pub fn resize_in(root: &Path, i: ResizeInput) -> Result<Vec<Content>, ToolError> {
    let (input, decoded) = open(root, i.source()?)?;
    let src = (decoded.image.width(), decoded.image.height());
    let (w, h) = geometry::resize_to(
        src,
        i.width,
        i.height,
        i.scale,
        i.keep_aspect.unwrap_or(true),
    )?;
    geometry::check_output(src.0, w, h)?;
    let filter = i.filter.unwrap_or(Filter::Lanczos3);
    host::progress(
        &format!("resizing {}×{} to {w}×{h}", src.0, src.1),
        None,
        None,
    );
    let image = resample::resize(&decoded.image, w, h, filter);
    let made = Made {
        out: Out::Pixels(Cow::Owned(image)),
        op: "resize",
        format: out_format(i.format, i.output.as_deref(), decoded.format)?,
        quality: i.quality,
        output: i.output,
        extra: json!({}),
    };
    finish(root, input, Shape::of(&decoded), made)
}

pub fn crop_in(root: &Path, i: CropInput) -> Result<Vec<Content>, ToolError> {
    let (input, decoded) = open(root, i.source()?)?;
    let size = (decoded.image.width(), decoded.image.height());
    let (x, y, w, h) = geometry::crop_box(size, i.x, i.y, i.width, i.height)?;
    let made = Made {
        out: Out::Pixels(Cow::Owned(decoded.image.crop_imm(x, y, w, h))),
        op: "crop",
        format: out_format(i.format, i.output.as_deref(), decoded.format)?,
        quality: i.quality,
        output: i.output,
        extra: json!({"box": {"x": x, "y": y, "width": w, "height": h}}),
    };
    finish(root, input, Shape::of(&decoded), made)
}

pub fn zoom_in_in(root: &Path, i: ZoomInput) -> Result<Vec<Content>, ToolError> {
    let (input, decoded) = open(root, i.source()?)?;
    let size = (decoded.image.width(), decoded.image.height());
    let coordinates = i.coordinates.unwrap_or_default();
    let ([l, t, r, b], (w, h)) = geometry::zoom_box(size, i.bbox_2d, coordinates)?;
    let region = decoded.image.crop_imm(l, t, r - l, b - t);
    let image = resample::resize(&region, w, h, Filter::Catmullrom);
    let made = Made {
        out: Out::Pixels(Cow::Owned(image)),
        op: "zoom",
        format: out_format(i.format, i.output.as_deref(), Format::Png)?,
        quality: None,
        output: i.output,
        extra: json!({
            "bbox_2d": i.bbox_2d,
            "coordinates": match coordinates { Coordinates::Relative => "relative", Coordinates::Pixels => "pixels" },
            "box": [l, t, r, b],
            "label": i.label,
        }),
    };
    finish(root, input, Shape::of(&decoded), made)
}

pub fn rotate_in(root: &Path, i: RotateInput) -> Result<Vec<Content>, ToolError> {
    let turn = i.degrees.rem_euclid(360);
    if i.degrees % 90 != 0 {
        return Err(ToolError::invalid_input(format!(
            "`degrees` must be a multiple of 90 (a lossless turn), not {}",
            i.degrees
        )));
    }
    let (input, decoded) = open(root, i.source()?)?;
    let turned = match turn {
        90 => Cow::Owned(decoded.image.rotate90()),
        180 => Cow::Owned(decoded.image.rotate180()),
        270 => Cow::Owned(decoded.image.rotate270()),
        _ => Cow::Borrowed(&decoded.image),
    };
    let image = match i.flip {
        Some(Flip::Horizontal) => Cow::Owned(turned.fliph()),
        Some(Flip::Vertical) => Cow::Owned(turned.flipv()),
        None => turned,
    };
    let made = Made {
        out: Out::Pixels(image),
        op: "rotate",
        format: out_format(i.format, i.output.as_deref(), decoded.format)?,
        quality: i.quality,
        output: i.output,
        extra: json!({"degrees": turn}),
    };
    finish(root, input, Shape::of(&decoded), made)
}

pub fn convert_in(root: &Path, i: ConvertInput) -> Result<Vec<Content>, ToolError> {
    let (input, decoded) = open(root, i.source()?)?;
    let made = Made {
        out: Out::Pixels(Cow::Borrowed(&decoded.image)),
        op: "convert",
        format: out_format(Some(i.format), i.output.as_deref(), i.format)?,
        quality: i.quality,
        output: i.output,
        extra: json!({}),
    };
    finish(root, input, Shape::of(&decoded), made)
}

pub fn compress_in(root: &Path, i: CompressInput) -> Result<Vec<Content>, ToolError> {
    let format = out_format(i.format, i.output.as_deref(), Format::Jpeg)?;
    if matches!(format, Format::Png | Format::Gif) {
        return Err(ToolError::invalid_input(format!(
            "compress writes jpeg or webp, not {} (convert writes any format)",
            format.name()
        )));
    }
    let quality = i.quality.unwrap_or(75);
    let input = source::load(root, i.source()?)?;
    host::progress(
        &format!("compressing to {} at quality {quality}", format.name()),
        None,
        None,
    );
    // JPEG to JPEG without pixels where the file allows (`jpeg`'s doc);
    // an image its EXIF turns is turned in pixels.
    let header = decode::header(&input.bytes)?;
    let quick = (format == Format::Jpeg && header.format == Format::Jpeg && header.upright)
        .then(|| jpeg::recompress(&input.bytes, quality))
        .flatten();
    let (source, bytes) = match quick {
        Some(bytes) => {
            let shape = Shape {
                width: header.width,
                height: header.height,
                format: header.format,
                bytes: input.bytes.len(),
            };
            (shape, bytes)
        }
        None => {
            let decoded = decode::decode(&input.bytes)?;
            let bytes = format::encode(&decoded.image, format, Some(quality))?;
            (Shape::of(&decoded), bytes)
        }
    };
    let (original, compressed) = (source.bytes, bytes.len());
    let lossless = format == Format::Webp;
    let made = Made {
        // Compress keeps the size: the result's is the source's.
        out: Out::Encoded {
            bytes,
            width: source.width,
            height: source.height,
        },
        op: "compressed",
        format,
        quality: Some(quality),
        output: i.output,
        extra: json!({
            "original_size": original,
            "compressed_size": compressed,
            "compression_ratio": (original as f64 / compressed as f64 * 1000.0).round() / 1000.0,
            "quality": if lossless { None } else { Some(quality) },
            "lossless": lossless,
        }),
    };
    finish(root, input, source, made)
}

fn root() -> &'static Path {
    Path::new(WORKSPACE)
}

fn info(input: InfoInput) -> Result<Json<Info>, ToolError> {
    info_in(root(), &input).map(Json)
}

fn resize(input: ResizeInput) -> Result<Vec<Content>, ToolError> {
    resize_in(root(), input)
}

fn crop(input: CropInput) -> Result<Vec<Content>, ToolError> {
    crop_in(root(), input)
}

fn zoom_in(input: ZoomInput) -> Result<Vec<Content>, ToolError> {
    zoom_in_in(root(), input)
}

fn rotate(input: RotateInput) -> Result<Vec<Content>, ToolError> {
    rotate_in(root(), input)
}

fn convert(input: ConvertInput) -> Result<Vec<Content>, ToolError> {
    convert_in(root(), input)
}

fn compress(input: CompressInput) -> Result<Vec<Content>, ToolError> {
    compress_in(root(), input)
}

toolhost_sdk::toolkit! {
    info: "Read an image's format, width, height and colour type from its header (no decoding). The image is one of `path` (a workspace file), `url` or `base64`.",
    resize: "Resize an image to `width` and/or `height` (aspect kept unless `keep_aspect` is false) or by `scale`. Answers the result as an image and writes it to the workspace (`output`, default <stem>.resize.<ext> beside the input).",
    crop: "Crop an image to the box `x`, `y`, `width`, `height` in pixels. Answers the result as an image and writes it to the workspace.",
    zoom_in: "Zoom in on a region of an image: `bbox_2d` [x1, y1, x2, y2] in 0-1000 relative coordinates (Qwen-VL's convention; `coordinates: \"pixels\"` for pixels), with an optional `label`. The region is cropped and scaled up (at least 512x512 pixels' worth) and answered as an image.",
    rotate: "Rotate an image clockwise by 90, 180 or 270 degrees (lossless), optionally flipped. Answers the result as an image and writes it to the workspace.",
    convert: "Convert an image to png, jpeg, webp (lossless) or gif. Answers the result as an image and writes it to the workspace (default <stem>.convert.<ext>).",
    compress: "Compress an image to JPEG at `quality` (1-100, default 75) or to lossless WebP, writing <stem>.compressed.<ext>; answers original_size, compressed_size (bytes), compression_ratio (original / compressed) and output_path, and the image.",
}

#[cfg(test)]
mod tests;
