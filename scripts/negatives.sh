#!/usr/bin/env bash
# Face-free images for a `kind = "negatives"` source (`images = DIR`), from
# packages, never committed: scikit-image's bundled images without people
# or animals (PyPI, into .venv-negatives by scripts/grin_venv.py), the wallpapers
# of Debian's gnome-backgrounds and desktop-base (landscapes, abstract art),
# and a larger second part (below) so that the test split, about a tenth, can
# resolve the 0.02-per-image bound. The source splits them by file name
# into train / validation / test like every other source; `grin eval`
# reports the test split's false detections per image ("face-free").
#
#   scripts/negatives.sh [DIR]      default DIR: data/negatives/images
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-data/negatives/images}
mkdir -p "$DIR"
# Written afresh: a picture left out since the last run must not linger.
find "$DIR" -maxdepth 1 -name '*.png' -delete

# scikit-image's data folder: leaving out astronaut and camera (people),
# chelsea and horse (animals), phantom (a head) and the multi-frame files.
. scripts/venvs.sh
PY=$(venv_python negatives)
"$PY" scripts/py/negatives_skimage.py "$DIR"

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
    "$PY" -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).convert("RGB").save(sys.argv[2])' \
        "$f" "$DIR/gnome-$(basename "${f%.*}").png"
    n=$((n + 1))
done
for theme in /usr/share/desktop-base/*-theme; do
    [ -f "$theme/grub/grub-16x9.png" ] || continue
    cp "$theme/grub/grub-16x9.png" "$DIR/debian-$(basename "$theme").png"
    n=$((n + 1))
done
echo "negatives: $n Debian wallpapers"

# The second part: Debian's MATE and KDE Plasma wallpapers (photos and
# abstract art), the sky backdrops, level shots and surface textures of
# two games (neverball, extremetuxracer: terrain, snow, wood, metal; their
# characters left out), and clip art from Openclipart's categories without
# people or animals (on white). Each is greyed later by grin like every
# image; here it is scaled to at most 1024 px a side, so that the 800-odd
# training images fit a run's memory. Files named for an
# animal, a person or a mascot are left out by name, and so are the ones
# a look at every picture found a face or an animal in (SEEN). YuNet is
# no judge here: at 0.3 it fires on 33 of these images (motorcycles, the
# moon, wallpapers), and it scores a drawn face below some of those.
need=()
for pkg in mate-backgrounds plasma-workspace-wallpapers neverball-data extremetuxracer-data openclipart-png; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi
"$PY" scripts/py/negatives_packages.py "$DIR"

echo "negatives: $(ls "$DIR" | wc -l) images in $DIR"
