"""scripts/negatives.sh's first part: scikit-image's bundled images without people or animals.

  negatives_skimage.py DIR        (needs scikit-image)

Copies the listed files of scikit-image's data folder into DIR as skimage-NAME and prints
`negatives: N scikit-image images`.
"""
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
