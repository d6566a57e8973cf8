# The YuNet peer (libfacedetection, ../shared/peers/yunet), built once into
# an ignored folder: sourced by every script that runs it.
#
#   . scripts/yunet.sh
#   YUNET=$(yunet_detect)        # path of yunet-detect, built on first use
#   detect_both DIR [FLAGS...]   # both detectors on DIR's PNGs (needs DETECT,
#                                # YUNET and MODEL_FLAGS set)
#
# env: YUNET_BUILD (default target/yunet). The build needs cmake and g++,
# installed from apt when absent (Debian; sudo when not root).

YUNET_PEER=../shared/peers/yunet

yunet_detect() {
    local build=${YUNET_BUILD:-target/yunet}
    if [ ! -x "$build/yunet-detect" ]; then
        [ -x "$YUNET_PEER/build.sh" ] || { echo "yunet: $YUNET_PEER/build.sh is missing" >&2; return 1; }
        local missing=() tool
        for tool in cmake g++; do command -v "$tool" >/dev/null || missing+=("$tool"); done
        if [ ${#missing[@]} -gt 0 ]; then
            echo "yunet: installing ${missing[*]}" >&2
            local sudo=""
            [ "$(id -u)" -eq 0 ] || sudo=sudo
            $sudo apt-get update -qq >&2
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
        fi
        "$YUNET_PEER/build.sh" "$build" >&2
    fi
    echo "$build/yunet-detect"
}

# Every detection each detector exposes (grin down to 0.05, YuNet down to its
# library's floor of 0.2) and its operating point, on the PNGs in DIR, into
# DIR/{grin,yunet}-{scored,deployed}.jsonl; grin's extra flags follow DIR.
detect_both() {
    local dir=$1
    shift
    local images=("$dir"/*.png)
    "$DETECT" "${MODEL_FLAGS[@]}" --json "$@" --threshold 0.05 "${images[@]}" >"$dir/grin-scored.jsonl"
    "$DETECT" "${MODEL_FLAGS[@]}" --json "$@" "${images[@]}" >"$dir/grin-deployed.jsonl"
    "$YUNET" --threshold 0.2 "${images[@]}" >"$dir/yunet-scored.jsonl"
    "$YUNET" "${images[@]}" >"$dir/yunet-deployed.jsonl"
}
