"""scripts/mine-negatives.sh's second opinion: YuNet's faces in the mined crops.

  mined_yunet_check.py OUT YUNET_SCORE        (needs Pillow)

Reads OUT/mined.jsonl (`grin mine`'s {"image", "box"} lines) and OUT/yunet.jsonl (yunet-detect's
{"image", "detections": [{"box"}]} lines, at YUNET_SCORE, which is only printed). In OUT it
deletes each crop whose mined box YuNet calls a face, and paints every other face YuNet found
over with the letterbox grey (114), in place. Prints one line: crops deleted, painted and left.
"""
import json, os, sys
from PIL import Image, ImageDraw
out = sys.argv[1]
mined = {json.loads(l)["image"]: json.loads(l)["box"] for l in open(os.path.join(out, "mined.jsonl"))}
deleted = painted = 0
for line in open(os.path.join(out, "yunet.jsonl")):
    r = json.loads(line)
    name = os.path.basename(r["image"])
    faces = [d["box"] for d in r["detections"]]
    if not faces or name not in mined:
        continue
    x0, y0, x1, y1 = mined[name]
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    def near(f):
        # The mined box's centre inside the face grown by half, or the face's centre inside the mined box.
        mx, my = (f[2] - f[0]) / 2, (f[3] - f[1]) / 2
        return (f[0] - mx <= cx <= f[2] + mx and f[1] - my <= cy <= f[3] + my) or (x0 <= (f[0] + f[2]) / 2 <= x1 and y0 <= (f[1] + f[3]) / 2 <= y1)
    path = os.path.join(out, name)
    if any(near(f) for f in faces):
        os.remove(path)
        deleted += 1
        continue
    im = Image.open(path)
    draw = ImageDraw.Draw(im)
    for f in faces:
        mx, my = (f[2] - f[0]) / 2, (f[3] - f[1]) / 2
        draw.rectangle([f[0] - mx, f[1] - my, f[2] + mx, f[3] + my], fill=114 if im.mode == "L" else (114, 114, 114))
    im.save(path)
    painted += 1
left = sum(1 for n in os.listdir(out) if n.endswith(".png"))
print(f"mine-negatives: YuNet (score >= {sys.argv[2]}) deleted {deleted} crops whose detection it calls a face, painted its faces over in {painted}; {left} crops in {out}")
