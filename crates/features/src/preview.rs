//! A contact sheet of samples with their boxes drawn, so a person can see
//! what the model will see: green = smiling, red = not smiling, yellow =
//! unknown, grey = ignore region, each box tagged with a tiny `S` / `N` / `?` / `x`.

use crate::sample::{Sample, Smile};
use image::{Rgb, RgbImage};

const MARGIN: u32 = 4;
const BACKDROP: Rgb<u8> = Rgb([32, 32, 48]);

pub fn colour(smile: Smile) -> Rgb<u8> {
    match smile {
        Smile::Yes => Rgb([0, 230, 0]),
        Smile::No => Rgb([240, 30, 30]),
        Smile::Unknown => Rgb([250, 220, 0]),
        Smile::Ignore => Rgb([150, 150, 150]),
    }
}

/// `(columns, rows)` of a sheet of `count` samples in `cols` columns.
fn grid(count: usize, cols: usize) -> (u64, u64) {
    let cols = cols.clamp(1, count.max(1)) as u64;
    (cols, (count as u64).div_ceil(cols).max(1))
}

/// `(width, height)` of the sheet of `count` samples of `cell` size in
/// `cols` columns: what [`contact_sheet`] makes, known before the samples
/// are (`grin features preview` checks it first).
pub fn sheet_size(count: usize, cols: usize, (cw, ch): (u32, u32)) -> (u64, u64) {
    let (cols, rows) = grid(count, cols);
    let m = u64::from(MARGIN);
    (cols * (u64::from(cw) + m) + m, rows * (u64::from(ch) + m) + m)
}

/// Samples in a grid of `cols` columns; every cell has the first sample's
/// size. The sheet's sides are within u32 (callers check [`sheet_size`]).
pub fn contact_sheet(samples: &[Sample], cols: usize) -> RgbImage {
    let cell = samples.first().map(|s| (s.width, s.height)).unwrap_or((1, 1));
    let (width, height) = sheet_size(samples.len(), cols, cell);
    let mut sheet = RgbImage::from_pixel(width as u32, height as u32, BACKDROP);
    let (cols, (cw, ch)) = (grid(samples.len(), cols).0 as u32, cell);
    for (i, sample) in samples.iter().enumerate() {
        let (col, row) = (i as u32 % cols, i as u32 / cols);
        let (ox, oy) = (MARGIN + col * (cw + MARGIN), MARGIN + row * (ch + MARGIN));
        draw_sample(&mut sheet, sample, ox, oy);
    }
    sheet
}

fn draw_sample(sheet: &mut RgbImage, s: &Sample, ox: u32, oy: u32) {
    let c = s.channels as usize;
    for y in 0..s.height {
        for x in 0..s.width {
            let at = (y * s.width + x) as usize * c;
            let px = if c == 1 {
                let v = s.pixels[at];
                Rgb([v, v, v])
            } else {
                Rgb([s.pixels[at], s.pixels[at + 1], s.pixels[at + 2]])
            };
            sheet.put_pixel(ox + x, oy + y, px);
        }
    }
    let clip = (ox, oy, ox + s.width - 1, oy + s.height - 1);
    for b in &s.boxes {
        let colour = colour(b.smile);
        let x0 = ox as i64 + b.x0.round() as i64;
        let y0 = oy as i64 + b.y0.round() as i64;
        let x1 = ox as i64 + b.x1.round() as i64 - 1;
        let y1 = oy as i64 + b.y1.round() as i64 - 1;
        rectangle(sheet, [x0, y0, x1, y1], colour, clip);
        tag(sheet, x0 + 2, y0 + 2, b.smile, colour, clip);
    }
}

/// Outline clipped to the sample's cell.
fn rectangle(img: &mut RgbImage, [x0, y0, x1, y1]: [i64; 4], colour: Rgb<u8>, clip: (u32, u32, u32, u32)) {
    for x in x0..=x1 {
        put(img, x, y0, colour, clip);
        put(img, x, y1, colour, clip);
    }
    for y in y0..=y1 {
        put(img, x0, y, colour, clip);
        put(img, x1, y, colour, clip);
    }
}

fn put(img: &mut RgbImage, x: i64, y: i64, colour: Rgb<u8>, (cx0, cy0, cx1, cy1): (u32, u32, u32, u32)) {
    if x >= cx0 as i64 && x <= cx1 as i64 && y >= cy0 as i64 && y <= cy1 as i64 {
        img.put_pixel(x as u32, y as u32, colour);
    }
}

/// 3x5 glyphs, one row per entry, bit 2 = left column.
const GLYPH_S: [u8; 5] = [0b111, 0b100, 0b111, 0b001, 0b111];
const GLYPH_N: [u8; 5] = [0b101, 0b111, 0b111, 0b111, 0b101];
const GLYPH_Q: [u8; 5] = [0b111, 0b001, 0b011, 0b000, 0b010];
const GLYPH_X: [u8; 5] = [0b101, 0b101, 0b010, 0b101, 0b101];

/// The smile letter on a dark plate, so it reads on any background.
fn tag(img: &mut RgbImage, x: i64, y: i64, smile: Smile, colour: Rgb<u8>, clip: (u32, u32, u32, u32)) {
    let glyph = match smile {
        Smile::Yes => GLYPH_S,
        Smile::No => GLYPH_N,
        Smile::Unknown => GLYPH_Q,
        Smile::Ignore => GLYPH_X,
    };
    for dy in -1..6 {
        for dx in -1..4 {
            put(img, x + dx, y + dy, Rgb([0, 0, 0]), clip);
        }
    }
    for (dy, bits) in glyph.iter().enumerate() {
        for dx in 0..3 {
            if bits & (0b100 >> dx) != 0 {
                put(img, x + dx, y + dy as i64, colour, clip);
            }
        }
    }
}
