# shellcheck shell=bash disable=SC2034  # sourced; the lists are read through venv_python
# The Python packages of every shell script's venv, by name, in one place. scripts/grin_venv.py
# builds `.venv-NAME` at the repository's root on first use and rebuilds it when the list it is
# given changes, so scripts that share a venv must pass the same list: they take it from here.
#
#   . "$(dirname "${BASH_SOURCE[0]}")/venvs.sh"    (or `. scripts/venvs.sh` from the root)
#   PY=$(venv_python NAME)    # the venv's python, built first if needed; under `set -e` a
#                             # failed build stops the script with grin_venv.py's message

# bench-detect.sh (Haar peer). OpenCV 5 moved the Haar cascades out of the main package: pin 4.x.
VENV_DETECT=("opencv-python-headless>=4.8,<5" numpy)
# bench-features.sh and bench-scaling.sh (feature and scaling peers).
VENV_FEATURES=(numpy pillow opencv-python-headless)
# bench-latency.sh (scripts/peers/age_photos.py).
VENV_LATENCY=(numpy Pillow)
# bench-store.sh (h5py and .npy peers).
VENV_STORE=(numpy h5py)
# bench-train.sh. torch from PyPI: the CPU wheel is what a laptop user gets.
VENV_TRAIN=(torch numpy)
# negatives.sh and mine-negatives.sh: scikit-image's bundled images, and Pillow, which
# scikit-image brings, to convert wallpapers and paint over crops.
VENV_NEGATIVES=(scikit-image)
# onnx-check.sh. OpenCV 4.x: the DNN module most installs (and Raspberry Pi OS) have.
# Pillow: the example's decoder.
VENV_ONNX=("opencv-python-headless>=4.8,<5" onnxruntime onnx numpy pillow)
# smile-ceiling.sh. OpenCV only for haar_peer.py's helpers, which smile_agreement.py shares.
VENV_CEILING=(torch numpy pillow xxhash "opencv-python-headless>=4.8,<5")

VENVS_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# venv_python NAME: prints .venv-NAME's python, building the venv from VENV_<NAME> first if needed.
venv_python() {
    local list="VENV_${1^^}"
    if ! declare -p "$list" >/dev/null 2>&1; then
        echo "venvs.sh: no venv named $1 (no $list in $VENVS_SCRIPTS/venvs.sh)" >&2
        return 2
    fi
    list="${list}[@]"
    python3 "$VENVS_SCRIPTS/grin_venv.py" "$1" "${!list}"
}
