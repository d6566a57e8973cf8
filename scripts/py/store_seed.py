"""scripts/fuzz.sh's seed for the `store` fuzz target, from a dataset `grin precompute` wrote.

  store_seed.py STORE_DIR OUT

Reads STORE_DIR/manifest.json and STORE_DIR/shard-00000.bin and writes OUT: the manifest's
length (2 bytes, little-endian), the manifest, then the shard. Prints nothing.
"""
import struct, sys
d, out = sys.argv[1], sys.argv[2]
m = open(f"{d}/manifest.json", "rb").read()
open(out, "wb").write(struct.pack("<H", len(m)) + m + open(f"{d}/shard-00000.bin", "rb").read())
