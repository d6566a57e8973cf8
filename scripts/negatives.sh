#!/usr/bin/env bash
# Face-free images for a `kind = "negatives"` source (`images = DIR`), from
# packages, never committed: scikit-image's bundled images without people
# or animals (PyPI, into .venv-negatives), and the wallpapers of Debian's
# gnome-backgrounds and desktop-base (landscapes, abstract art). The source
# splits them by file name into train / validation / test like every
# other source; `grin eval` reports the test split's false detections per
# image ("face-free").
#
#   scripts/negatives.sh [DIR]      default DIR: data/negatives/images
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-data/negatives/images}
mkdir -p "$DIR"

# scikit-image's data folder: leaving out astronaut and camera (people),
# chelsea and horse (animals), phantom (a head) and the multi-frame files.
VENV=.venv-negatives
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet scikit-image
fi
"$VENV/bin/python" - "$DIR" <<'PY'
import os, shutil, sys
import skimage
out = sys.argv[1]
data = os.path.join(os.path.dirname(skimage.__file__), "data")
keep = ["brick.png", "cell.png", "chessboard_GRAY.png", "chessboard_RGB.png", "clock_motion.png", "coffee.png",
        "coins.png", "color.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png", "logo.png",
        "microaneurysms.png", "moon.png", "motorcycle_left.png", "motorcycle_right.png", "page.png", "retina.jpg",
        "rocket.jpg", "text.png"]
for name in keep:
    shutil.copy(os.path.join(data, name), os.path.join(out, "skimage-" + name))
print(f"negatives: {len(keep)} scikit-image images")
PY

# Debian's wallpapers: one file per picture (the largest PNG/JPEG of each).
need=()
[ -d /usr/share/backgrounds/gnome ] || need+=(gnome-backgrounds)
[ -d /usr/share/desktop-base ] || need+=(desktop-base)
if [ ${#need[@]} -gt 0 ]; then
    apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
# GNOME's are WebP (grin reads PNG and JPEG): converted with Pillow, which
# scikit-image brought into the venv. desktop-base ships each theme as SVG
# and as the PNG its boot screen shows (grub-16x9.png).
n=0
for f in /usr/share/backgrounds/gnome/*.webp /usr/share/backgrounds/gnome/*.jpg /usr/share/backgrounds/gnome/*.png; do
    [ -f "$f" ] || continue
    "$VENV/bin/python" -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).convert("RGB").save(sys.argv[2])' \
        "$f" "$DIR/gnome-$(basename "${f%.*}").png"
    n=$((n + 1))
done
for theme in /usr/share/desktop-base/*-theme; do
    [ -f "$theme/grub/grub-16x9.png" ] || continue
    cp "$theme/grub/grub-16x9.png" "$DIR/debian-$(basename "$theme").png"
    n=$((n + 1))
done
echo "negatives: $n Debian wallpapers"
echo "negatives: $(ls "$DIR" | wc -l) images in $DIR"
