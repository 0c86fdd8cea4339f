//! Sizes and boxes: what a resize, a crop or a zoom-in makes of an image of
//! a given size, checked before any pixel is touched.

use toolhost_sdk::{Deserialize, JsonSchema, ToolError};

/// Most pixels an output may have (resize, zoom-in): 25 megapixels.
pub const MAX_OUTPUT_PIXELS: u64 = 25_000_000;
/// Most bytes a resize's working buffer may take: the resampler keeps one
/// pass in 32-bit float RGBA (16 bytes a pixel, input width × output height).
pub const MAX_RESIZE_WORK: u64 = 256 << 20;
/// Smallest side of a zoom-in box, pixels (a smaller box is grown around
/// its centre, as Qwen-Agent's tool does).
pub const MIN_ZOOM_SIDE: f64 = 32.0;
/// A zoomed-in region is scaled up to at least this many pixels (512×512)...
pub const MIN_ZOOM_PIXELS: f64 = 512.0 * 512.0;
/// ... and down to at most this many (2048×2048), aspect kept.
pub const MAX_ZOOM_PIXELS: f64 = 2048.0 * 2048.0;

/// Refuse an output of `w`×`h` made from an input `src_w` wide by resampling.
pub fn check_output(src_w: u32, w: u32, h: u32) -> Result<(), ToolError> {
    let pixels = u64::from(w) * u64::from(h);
    if pixels > MAX_OUTPUT_PIXELS {
        return Err(ToolError::invalid_input(format!(
            "the result would be {w}×{h} ({:.1} megapixels); at most {} megapixels",
            pixels as f64 / 1e6,
            MAX_OUTPUT_PIXELS / 1_000_000
        )));
    }
    let work = u64::from(src_w) * u64::from(h) * 16;
    if work > MAX_RESIZE_WORK {
        return Err(ToolError::invalid_input(format!(
            "resizing a {src_w}-pixel-wide image to {w}×{h} needs {} MiB of working memory; \
             at most {} MiB: ask for a smaller size",
            work >> 20,
            MAX_RESIZE_WORK >> 20
        )));
    }
    Ok(())
}

/// The size a resize of a `w`×`h` image makes: `scale`, or `width` and/or
/// `height` (one alone keeps the aspect; both fit inside the box keeping
/// the aspect unless `keep_aspect` is false).
pub fn resize_to(
    (w, h): (u32, u32),
    width: Option<u32>,
    height: Option<u32>,
    scale: Option<f64>,
    keep_aspect: bool,
) -> Result<(u32, u32), ToolError> {
    let (fw, fh) = (f64::from(w), f64::from(h));
    let (nw, nh) = match (width, height, scale) {
        (None, None, Some(s)) => {
            if !(s.is_finite() && s > 0.0) {
                return Err(ToolError::invalid_input(
                    "`scale` must be a positive number",
                ));
            }
            (fw * s, fh * s)
        }
        (_, _, Some(_)) => {
            return Err(ToolError::invalid_input(
                "give `scale` or `width`/`height`, not both",
            ));
        }
        (None, None, None) => {
            return Err(ToolError::invalid_input(
                "give `width`, `height` (one keeps the aspect ratio) or `scale`",
            ));
        }
        (Some(0), _, _) | (_, Some(0), _) => {
            return Err(ToolError::invalid_input(
                "`width` and `height` must be at least 1",
            ));
        }
        (Some(nw), None, None) => (f64::from(nw), fh * f64::from(nw) / fw),
        (None, Some(nh), None) => (fw * f64::from(nh) / fh, f64::from(nh)),
        (Some(nw), Some(nh), None) if keep_aspect => {
            let r = (f64::from(nw) / fw).min(f64::from(nh) / fh);
            (fw * r, fh * r)
        }
        (Some(nw), Some(nh), None) => (f64::from(nw), f64::from(nh)),
    };
    let side = |v: f64| -> Result<u32, ToolError> {
        let v = v.round().max(1.0);
        if v > f64::from(u32::from(u16::MAX)) {
            return Err(ToolError::invalid_input(format!(
                "the result would be {nw:.0}×{nh:.0}: sides are at most 65535 pixels"
            )));
        }
        Ok(v as u32)
    };
    Ok((side(nw)?, side(nh)?))
}

/// The part of a `w`×`h` image a crop box covers, as `(x, y, width, height)`:
/// a box running past the right or bottom edge is cut there; one that starts
/// outside the image is refused.
pub fn crop_box(
    (w, h): (u32, u32),
    x: u32,
    y: u32,
    width: u32,
    height: u32,
) -> Result<(u32, u32, u32, u32), ToolError> {
    if width == 0 || height == 0 {
        return Err(ToolError::invalid_input(
            "`width` and `height` must be at least 1",
        ));
    }
    if x >= w || y >= h {
        return Err(ToolError::invalid_input(format!(
            "the box starts at ({x}, {y}), outside the {w}×{h} image"
        )));
    }
    Ok((x, y, width.min(w - x), height.min(h - y)))
}

/// How a zoom-in's `bbox_2d` is measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Coordinates {
    /// 0–1000 on each axis, whatever the image's size (Qwen-VL's grounding
    /// convention, which Qwen-Agent's `image_zoom_in_tool` takes).
    #[default]
    Relative,
    /// Pixels of the image.
    Pixels,
}

/// A zoom-in: the pixel box `[left, top, right, bottom)` of a `w`×`h` image
/// that `bbox` (x1, y1, x2, y2) names, grown to [`MIN_ZOOM_SIDE`] around its
/// centre when smaller, and the size it is scaled to.
pub fn zoom_box(
    (w, h): (u32, u32),
    bbox: [f64; 4],
    coordinates: Coordinates,
) -> Result<([u32; 4], (u32, u32)), ToolError> {
    let [x1, y1, x2, y2] = bbox;
    if bbox.iter().any(|v| !v.is_finite()) {
        return Err(ToolError::invalid_input("`bbox_2d` must hold four numbers"));
    }
    if x2 <= x1 || y2 <= y1 {
        return Err(ToolError::invalid_input(format!(
            "`bbox_2d` is [x1, y1, x2, y2] with x1 < x2 and y1 < y2 (top-left, bottom-right); \
             got [{x1}, {y1}, {x2}, {y2}]"
        )));
    }
    let (fw, fh) = (f64::from(w), f64::from(h));
    let (sx, sy, limit) = match coordinates {
        Coordinates::Relative => (fw / 1000.0, fh / 1000.0, (1000.0, 1000.0)),
        Coordinates::Pixels => (1.0, 1.0, (fw, fh)),
    };
    if x1 >= limit.0 || y1 >= limit.1 || x2 <= 0.0 || y2 <= 0.0 {
        let unit = match coordinates {
            Coordinates::Relative => "0–1000 relative coordinates".to_owned(),
            Coordinates::Pixels => format!("pixels of the {w}×{h} image"),
        };
        return Err(ToolError::invalid_input(format!(
            "`bbox_2d` [{x1}, {y1}, {x2}, {y2}] lies outside the image ({unit})"
        )));
    }
    let mut l = (x1 * sx).max(0.0);
    let mut t = (y1 * sy).max(0.0);
    let mut r = (x2 * sx).min(fw);
    let mut b = (y2 * sy).min(fh);
    // Too small to see: grow to MIN_ZOOM_SIDE around the centre, then shift
    // back inside the image.
    for (lo, hi, size) in [(&mut l, &mut r, fw), (&mut t, &mut b, fh)] {
        let side = MIN_ZOOM_SIDE.min(size);
        if *hi - *lo < side {
            let centre = (*lo + *hi) / 2.0;
            *lo = (centre - side / 2.0).clamp(0.0, size - side);
            *hi = *lo + side;
        }
    }
    let (l, t) = (l.floor() as u32, t.floor() as u32);
    let (r, b) = ((r.ceil() as u32).min(w), (b.ceil() as u32).min(h));
    let (bw, bh) = (f64::from(r - l), f64::from(b - t));
    let area = bw * bh;
    let s = if area < MIN_ZOOM_PIXELS {
        (MIN_ZOOM_PIXELS / area).sqrt()
    } else if area > MAX_ZOOM_PIXELS {
        (MAX_ZOOM_PIXELS / area).sqrt()
    } else {
        1.0
    };
    let size = (
        ((bw * s).round() as u32).max(1),
        ((bh * s).round() as u32).max(1),
    );
    Ok(([l, t, r, b], size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_keeps_the_aspect_unless_told() {
        assert_eq!(
            resize_to((4000, 3000), Some(1024), None, None, true).unwrap(),
            (1024, 768)
        );
        assert_eq!(
            resize_to((4000, 3000), None, Some(300), None, true).unwrap(),
            (400, 300)
        );
        assert_eq!(
            resize_to((4000, 3000), Some(100), Some(100), None, true).unwrap(),
            (100, 75)
        );
        assert_eq!(
            resize_to((4000, 3000), Some(100), Some(100), None, false).unwrap(),
            (100, 100)
        );
        assert_eq!(
            resize_to((10, 10), None, None, Some(0.25), true).unwrap(),
            (3, 3)
        );
        assert_eq!(
            resize_to((1, 1000), Some(1), None, None, true).unwrap(),
            (1, 1000)
        );
        assert_eq!(
            resize_to((1000, 1), Some(10), None, None, true).unwrap(),
            (10, 1)
        );
        for bad in [
            resize_to((10, 10), None, None, None, true),
            resize_to((10, 10), Some(0), None, None, true),
            resize_to((10, 10), None, None, Some(-1.0), true),
            resize_to((10, 10), None, None, Some(f64::NAN), true),
            resize_to((10, 10), Some(5), None, Some(2.0), true),
            resize_to((10, 10), None, None, Some(1e6), true),
        ] {
            assert!(matches!(bad, Err(ToolError::InvalidInput(_))), "{bad:?}");
        }
    }

    #[test]
    fn outputs_are_bounded() {
        assert!(check_output(4000, 1024, 768).is_ok());
        assert!(check_output(100, 6000, 6000).is_err(), "36 MP");
        // 20000 wide to 20000 tall: 6 GB of float working memory.
        let err = check_output(20000, 1000, 20000).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("working memory")));
    }

    #[test]
    fn crop_boxes_are_cut_at_the_edges() {
        assert_eq!(
            crop_box((100, 50), 10, 20, 30, 10).unwrap(),
            (10, 20, 30, 10)
        );
        assert_eq!(
            crop_box((100, 50), 90, 40, 30, 30).unwrap(),
            (90, 40, 10, 10)
        );
        assert!(crop_box((100, 50), 100, 0, 1, 1).is_err());
        assert!(crop_box((100, 50), 0, 50, 1, 1).is_err());
        assert!(crop_box((100, 50), 0, 0, 0, 1).is_err());
    }

    #[test]
    fn zoom_boxes_follow_qwen_relative_coordinates() {
        // The right half of a 2000×1000 image: 1000×1000 pixels, kept.
        let (b, size) = zoom_box(
            (2000, 1000),
            [500.0, 0.0, 1000.0, 1000.0],
            Coordinates::Relative,
        )
        .unwrap();
        assert_eq!((b, size), ([1000, 0, 2000, 1000], (1000, 1000)));
        // The same box in pixels.
        let (b, _) = zoom_box(
            (2000, 1000),
            [1000.0, 0.0, 2000.0, 1000.0],
            Coordinates::Pixels,
        )
        .unwrap();
        assert_eq!(b, [1000, 0, 2000, 1000]);
        // A 10×10-pixel box grows to 32×32 around its centre, then is scaled to 512×512.
        let (b, size) = zoom_box(
            (1000, 1000),
            [100.0, 100.0, 110.0, 110.0],
            Coordinates::Pixels,
        )
        .unwrap();
        assert_eq!((b, size), ([89, 89, 121, 121], (512, 512)));
        // At a corner it is shifted inside.
        let (b, _) =
            zoom_box((1000, 1000), [0.0, 995.0, 5.0, 1000.0], Coordinates::Pixels).unwrap();
        assert_eq!(b, [0, 968, 32, 1000]);
        // Past the edges: cut there.
        let (b, _) = zoom_box(
            (100, 100),
            [-50.0, -50.0, 2000.0, 2000.0],
            Coordinates::Relative,
        )
        .unwrap();
        assert_eq!(b, [0, 0, 100, 100]);
        // A tiny image: the box is the whole image.
        let (b, size) =
            zoom_box((20, 10), [0.0, 0.0, 500.0, 500.0], Coordinates::Relative).unwrap();
        assert_eq!((b, size), ([0, 0, 20, 10], (724, 362)));
        // Large boxes are scaled down to 4 MP at most.
        let (_, (w, h)) = zoom_box(
            (8000, 6000),
            [0.0, 0.0, 1000.0, 1000.0],
            Coordinates::Relative,
        )
        .unwrap();
        assert!(
            u64::from(w) * u64::from(h) <= MAX_ZOOM_PIXELS as u64 + 4000,
            "{w}×{h}"
        );
    }

    #[test]
    fn bad_zoom_boxes_are_the_callers_error() {
        for bbox in [
            [10.0, 10.0, 5.0, 20.0],
            [10.0, 10.0, 20.0, 10.0],
            [1000.0, 0.0, 1200.0, 10.0],
            [0.0, 0.0, f64::NAN, 10.0],
            [-20.0, -20.0, -10.0, -10.0],
        ] {
            let err = zoom_box((100, 100), bbox, Coordinates::Relative).unwrap_err();
            assert!(
                matches!(err, ToolError::InvalidInput(m) if m.contains("bbox_2d")),
                "{bbox:?}"
            );
        }
    }
}
