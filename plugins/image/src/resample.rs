//! Resampling through fast_image_resize: separable convolution in fixed
//! point on 8-bit pixels, vectorised (wasm SIMD in the sandbox), alpha
//! premultiplied while filtering so transparent pixels do not bleed their
//! colour. Pixel types it has no kernel for go through the `image` crate's
//! resampler, as before.

use fast_image_resize::{FilterType as Kernel, ResizeAlg, ResizeOptions, Resizer};
use image::DynamicImage;
use image::imageops::FilterType;
use toolhost_sdk::{Deserialize, JsonSchema};

/// A resampling filter, fastest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    Nearest,
    Triangle,
    Catmullrom,
    Lanczos3,
}

impl Filter {
    fn algorithm(self) -> ResizeAlg {
        match self {
            Filter::Nearest => ResizeAlg::Nearest,
            Filter::Triangle => ResizeAlg::Convolution(Kernel::Bilinear),
            Filter::Catmullrom => ResizeAlg::Convolution(Kernel::CatmullRom),
            Filter::Lanczos3 => ResizeAlg::Convolution(Kernel::Lanczos3),
        }
    }

    fn image_filter(self) -> FilterType {
        match self {
            Filter::Nearest => FilterType::Nearest,
            Filter::Triangle => FilterType::Triangle,
            Filter::Catmullrom => FilterType::CatmullRom,
            Filter::Lanczos3 => FilterType::Lanczos3,
        }
    }
}

/// `image` resampled to exactly `w`×`h` with `filter`, in its own pixel type.
pub fn resize(image: &DynamicImage, w: u32, h: u32, filter: Filter) -> DynamicImage {
    let mut out = DynamicImage::new(w, h, image.color());
    let options = ResizeOptions::new().resize_alg(filter.algorithm());
    match Resizer::new().resize(image, &mut out, &options) {
        Ok(()) => out,
        // A pixel type without a kernel here (e.g. 32-bit float): the
        // `image` crate's resampler.
        Err(_) => image.resize_exact(w, h, filter.image_filter()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{GenericImageView, Luma, LumaA, Rgb, RgbImage, Rgba, Rgba32FImage};

    /// A smooth RGB gradient (resamplers agree on it up to rounding).
    fn smooth(w: u32, h: u32) -> DynamicImage {
        DynamicImage::ImageRgb8(RgbImage::from_fn(w, h, |x, y| {
            Rgb([
                (x * 255 / w) as u8,
                (y * 255 / h) as u8,
                ((x + y) * 127 / (w + h)) as u8,
            ])
        }))
    }

    /// Largest difference of any channel of any pixel.
    fn max_diff(a: &DynamicImage, b: &DynamicImage) -> u8 {
        assert_eq!(a.dimensions(), b.dimensions());
        let (a, b) = (a.to_rgba8(), b.to_rgba8());
        a.as_raw()
            .iter()
            .zip(b.as_raw())
            .map(|(x, y)| x.abs_diff(*y))
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn every_filter_matches_the_image_crates_resampler() {
        let src = smooth(300, 200);
        for filter in [
            Filter::Nearest,
            Filter::Triangle,
            Filter::Catmullrom,
            Filter::Lanczos3,
        ] {
            for (w, h) in [(120, 80), (640, 427), (300, 37)] {
                let ours = resize(&src, w, h, filter);
                let theirs = src.resize_exact(w, h, filter.image_filter());
                assert_eq!(ours.color(), src.color());
                // Nearest may pick the neighbouring pixel at a tie.
                let bound = if filter == Filter::Nearest { 3 } else { 2 };
                let d = max_diff(&ours, &theirs);
                assert!(d <= bound, "{filter:?} to {w}x{h}: off by {d}");
            }
        }
    }

    #[test]
    fn pixel_types_keep_their_type() {
        let grey = DynamicImage::ImageLuma8(image::GrayImage::from_fn(50, 40, |x, _| {
            Luma([x as u8 * 5])
        }));
        let grey_alpha =
            DynamicImage::ImageLumaA8(image::GrayAlphaImage::from_fn(50, 40, |x, _| {
                LumaA([x as u8, 200])
            }));
        let deep = DynamicImage::ImageRgb16(smooth(50, 40).to_rgb16());
        let float = DynamicImage::ImageRgba32F(Rgba32FImage::from_pixel(
            50,
            40,
            Rgba([0.25, 0.5, 0.75, 1.0]),
        ));
        for src in [grey, grey_alpha, deep, float] {
            let out = resize(&src, 20, 16, Filter::Lanczos3);
            assert_eq!(
                (out.width(), out.height(), out.color()),
                (20, 16, src.color())
            );
        }
        let float = resize(
            &DynamicImage::ImageRgba32F(Rgba32FImage::from_pixel(
                8,
                8,
                Rgba([0.25, 0.5, 0.75, 1.0]),
            )),
            4,
            4,
            Filter::Triangle,
        );
        let p = float.to_rgba32f().get_pixel(1, 1).0;
        assert!((p[1] - 0.5).abs() < 1e-3, "{p:?}");
    }

    #[test]
    fn transparent_pixels_do_not_bleed_their_colour() {
        // Left half opaque white, right half transparent *black*: scaled
        // down, the pixels across the edge are partly transparent and still
        // white (filtered with alpha premultiplied); without that they
        // would be grey, their colour as faded as their alpha.
        let src = DynamicImage::ImageRgba8(image::RgbaImage::from_fn(64, 8, |x, _| {
            if x < 32 {
                Rgba([255, 255, 255, 255])
            } else {
                Rgba([0, 0, 0, 0])
            }
        }));
        let out = resize(&src, 20, 4, Filter::Lanczos3).to_rgba8();
        let mut edge = 0;
        for x in 0..20 {
            let p = out.get_pixel(x, 2).0;
            if (16..240).contains(&p[3]) {
                edge += 1;
                assert!(p[0] > 245, "pixel {x}: {p:?} went grey");
            }
        }
        assert!(edge > 0, "no partly transparent pixel at the edge");
    }
}
