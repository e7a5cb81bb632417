# SPDX-License-Identifier: GPL-2.0-or-later
# Description: blocklib.sh: files whose 4 KiB blocks a test can find on the
# images (v2fsckdata, v2fsckstale): every block starts with
# "$BLK_TAG:TAG:NNNN:" followed by random bytes.  Set BLK_TAG, source after
# harness.sh.

# mkfile PATH TAG NBLOCKS: write such a file.
mkfile() {
	python3 - "$1" "$BLK_TAG" "$2" "$3" <<'PY'
import os, sys
path, pfx, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(path, "wb") as f:
    for i in range(n):
        head = b"%s:%s:%04d:" % (pfx.encode(), tag.encode(), i)
        f.write(head + os.urandom(4096 - len(head)))
PY
}
# blk_of IMG TAG N: the block of IMG holding block N of the file tagged TAG.
blk_of() {
	local off
	off=$(grep -obaF "$BLK_TAG:$2:$(printf %04d "$3"):" "$1" | head -n 1 | cut -d: -f1)
	[[ -n $off ]] || h_fail "block $3 of $2 not found on $1"
	((off % 4096 == 0)) || h_fail "block $3 of $2 at byte $off of $1: not block-aligned"
	echo $((off / 4096))
}
