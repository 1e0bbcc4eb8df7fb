//! 2D drawing on finished images: text, label boxes, leaders, legends.

use std::sync::OnceLock;

use ab_glyph::{FontRef, PxScale};
use image::{Rgb, RgbImage};
use imageproc::drawing::{
    draw_antialiased_line_segment_mut, draw_filled_circle_mut, draw_filled_rect_mut, draw_hollow_rect_mut,
    draw_text_mut, text_size,
};
use imageproc::pixelops::interpolate;
use imageproc::rect::Rect as PixelRect;

use crate::labels::{Placed, Rect};

/// DejaVu Sans Condensed Bold (assets/fonts, with its licence).
static FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansCondensed-Bold.ttf");

pub fn font() -> &'static FontRef<'static> {
    static FONT: OnceLock<FontRef<'static>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(FONT_BYTES).expect("the bundled font parses"))
}

/// Width and height of `text` at `px` pixels.
pub fn measure(text: &str, px: f32) -> (f64, f64) {
    let (w, h) = text_size(PxScale::from(px), font(), text);
    (f64::from(w), f64::from(h))
}

pub fn text(image: &mut RgbImage, x: f64, y: f64, px: f32, color: Rgb<u8>, s: &str) {
    draw_text_mut(image, color, x.round() as i32, y.round() as i32, PxScale::from(px), font(), s);
}

/// Text with a white halo, legible over anything.
pub fn text_with_halo(image: &mut RgbImage, x: f64, y: f64, px: f32, color: Rgb<u8>, s: &str) {
    for (dx, dy) in [(-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0)] {
        text(image, x + dx, y + dy, px, Rgb([255, 255, 255]), s);
    }
    text(image, x, y, px, color, s);
}

pub fn line(image: &mut RgbImage, a: (f64, f64), b: (f64, f64), color: Rgb<u8>) {
    draw_antialiased_line_segment_mut(
        image,
        (a.0.round() as i32, a.1.round() as i32),
        (b.0.round() as i32, b.1.round() as i32),
        color,
        interpolate,
    );
}

fn pixel_rect(r: &Rect) -> Option<PixelRect> {
    let (w, h) = ((r[2] - r[0]).round(), (r[3] - r[1]).round());
    (w >= 1.0 && h >= 1.0).then(|| PixelRect::at(r[0].round() as i32, r[1].round() as i32).of_size(w as u32, h as u32))
}

pub fn filled_rect(image: &mut RgbImage, r: &Rect, color: Rgb<u8>) {
    if let Some(p) = pixel_rect(r) {
        draw_filled_rect_mut(image, p, color);
    }
}

pub fn hollow_rect(image: &mut RgbImage, r: &Rect, color: Rgb<u8>) {
    if let Some(p) = pixel_rect(r) {
        draw_hollow_rect_mut(image, p, color);
    }
}

/// A placed label's leader: from the anchor (with a dot) to the box.
pub fn leader(image: &mut RgbImage, placed: &Placed, color: Rgb<u8>) {
    line(image, placed.anchor, placed.port, color);
    draw_filled_circle_mut(image, (placed.anchor.0.round() as i32, placed.anchor.1.round() as i32), 2, color);
}

/// The box and text of a label, drawn after every leader so no leader crosses a text.
pub fn label_box(image: &mut RgbImage, placed: &Placed, px: f32, color: Rgb<u8>) {
    filled_rect(image, &placed.rect, Rgb([255, 255, 255]));
    hollow_rect(image, &placed.rect, color);
    let (tw, th) = measure(&placed.id, px);
    let r = placed.rect;
    let x = r[0] + ((r[2] - r[0]) - tw) / 2.0;
    let y = r[1] + ((r[3] - r[1]) - th) / 2.0 - 1.0;
    text(image, x, y, px, Rgb([20, 20, 20]), &placed.id);
}

pub fn rgb(c: [f32; 3]) -> Rgb<u8> {
    Rgb(c.map(|v| v.round().clamp(0.0, 255.0) as u8))
}
