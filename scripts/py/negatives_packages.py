"""scripts/negatives.sh's second part: face-free pictures from Debian's packages, as PNGs.

  negatives_packages.py DIR        (needs Pillow)

Reads the MATE and KDE Plasma wallpapers, neverball's and extremetuxracer's backdrops, shots and
textures, and Openclipart's face-free categories under /usr/share (at most 50 drawings a
category), leaving out files named for a face, an animal or a mascot and the ones a look found
one in. Writes each into DIR as PREFIX-PATH.png (RGB, transparency on white, at most 1024 px a
side; pictures under 96 px a side left out) and prints `negatives: N WHAT` per group, and a line
on stderr for each file that does not open.
"""
import glob, os, re, sys
from PIL import Image
out = sys.argv[1]
# Names that show a face, an animal or a mascot (looked at, or named so).
AVOID = re.compile(r"elephant|ladybird|twowings|konqui|tux|penguin|char|player|face|head|eye|fish|bird|dog|cat|"
                   r"horse|cow|bug|butterfl|bee|animal|people|person|man|woman|girl|boy|baby|santa|angel|skull|"
                   r"smil|alien|monster|robot|doll|mask|clown|snowman|hand", re.I)
# Seen on a look at every picture: a face (a cartoon's, a flag's, a
# game's enemy), a person or an animal.
SEEN = ["beach_trip", "ampelfrau", "flowers/fiore_02", "crazy_cookie", "inservice_presentation",
        "mirjam_meijer", "evolution_steps", "chat_icon", "flags/asia/bhutan", "south_sandwich", "china_historic",
        "piggybank", "france_corsica", "rhone_alpes", "transportation/bambi", "speeddance", "thwomp",
        "etr/textures/menu_title", "etr/textures/splash", "SafeLanding", "deer"]
def picture(path, prefix):
    name = prefix + "-" + re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(os.path.relpath(path, "/usr/share"))[0]
                                   .replace("/", "_")) + ".png"
    try:
        im = Image.open(path)
        im.load()
    except Exception as e:
        print(f"negatives: skipped {path}: {e}", file=sys.stderr)
        return 0
    if min(im.size) < 96:
        return 0
    if im.mode in ("RGBA", "LA", "P"):
        im = im.convert("RGBA")
        white = Image.new("RGBA", im.size, (255, 255, 255, 255))
        im = Image.alpha_composite(white, im)
    im = im.convert("RGB")
    im.thumbnail((1024, 1024), Image.LANCZOS)
    im.save(os.path.join(out, name))
    return 1
def face_free(path):
    return not AVOID.search(path) and not any(seen in path for seen in SEEN)
def images(pattern, keep=face_free):
    return sorted(p for p in glob.glob(pattern, recursive=True) if p.lower().endswith((".png", ".jpg", ".jpeg")) and keep(p))
counts = {}
# Wallpapers: MATE's each file; Plasma's largest rendering of each picture.
mate = [p for p in images("/usr/share/backgrounds/mate/**/*") if not re.search(r"_\d+x\d+\.", p)]
counts["MATE wallpapers"] = sum(picture(p, "mate") for p in mate)
plasma = 0
for folder in sorted(glob.glob("/usr/share/wallpapers/*/contents/images")):
    if not face_free(folder):
        continue
    sizes = [(int(m[1]) * int(m[2]), p) for p in images(folder + "/*")
             for m in [re.match(r"(\d+)x(\d+)\.", os.path.basename(p))] if m]
    if sizes:
        plasma += picture(max(sizes)[1], "plasma")
counts["Plasma wallpapers"] = plasma
games = (images("/usr/share/games/neverball/back/*") + images("/usr/share/games/neverball/shot-*/*")
         + images("/usr/share/games/neverball/textures/**/*") + images("/usr/share/games/etr/env/**/*")
         + images("/usr/share/games/etr/terrains/**/*") + images("/usr/share/games/etr/textures/**/*"))
counts["game backdrops, shots and textures"] = sum(picture(p, "game") for p in games)
FACE_FREE = ["buildings", "computer", "containers", "electronics", "food", "geography", "office", "plants",
             "science", "shapes", "signs_and_symbols", "tools", "transportation"]
# At most 50 of each category, evenly spread, then the ones with a face
# left out (so that leaving one out moves no other); the star polygons
# (1,379 of the 1,582 shapes) count as a category of their own.
groups = {}
for c in FACE_FREE:
    for p in images(f"/usr/share/openclipart/png/{c}/**/*", keep=lambda p: True):
        groups.setdefault("stars" if "/stars/" in p else c, []).append(p)
clip = [p for g in groups.values() for p in g[::max(1, -(-len(g) // 50))] if face_free(p)]
counts["Openclipart drawings"] = sum(picture(p, "clip") for p in clip)
for what, n in counts.items():
    print(f"negatives: {n} {what}")
