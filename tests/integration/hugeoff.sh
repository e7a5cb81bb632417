#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: writes at the largest file offsets the kernel lets through a
# FUSE mount (2^49, 2^50, 2^62, 2^63 - 8192, and 4095 bytes at 2^63 - 4096,
# which end at 2^63 - 1, the largest file: the kernel refuses a write that
# would end at 2^63 with EINVAL, on tmpfs too) are stored: buffered (the page
# cache acknowledges them before the daemon sees them) and O_DIRECT, fsync
# succeeds, and after a remount st_size and the data are right; fallocate
# (every mode), truncate, SEEK_DATA/SEEK_HOLE and copy_file_range work up
# there; scrub and fsck.twinfs find the file system clean.
source "$(dirname "$0")/harness.sh"

FSCK=${FSCK:-$(dirname "$TWINFS")/fsck.twinfs}
[[ -x $FSCK ]] || h_fail "fsck.twinfs not found at $FSCK"
command -v python3 >/dev/null || h_fail "python3 is needed"

# The checks, in python for pwrite/O_DIRECT/lseek/copy_file_range at 64-bit
# offsets.  hugeoff.py MNT write|check: prints one line per failure, exits 1.
cat >"$T/hugeoff.py" <<'EOF'
import mmap, os, sys

mnt, phase = sys.argv[1], sys.argv[2]
MAXB = (1 << 63) - 1            # MAX_LFS_FILESIZE
OFFS = [1 << 49, 1 << 50, 1 << 62, (1 << 63) - 8192, (1 << 63) - 4096]
bad = []

def fail(msg):
    bad.append(msg)
    print("FAIL:", msg, flush=True)

def block(tag, off):
    head = b"%s@%d;" % (tag.encode(), off)
    return (head * (4096 // len(head) + 1))[:4096]

def wlen(off):                  # what fits below MAX_LFS_FILESIZE
    return min(4096, MAXB - off)

def aligned(data):
    m = mmap.mmap(-1, 4096)
    m.write(data)
    return memoryview(m)[:len(data)]

def path(name):
    return os.path.join(mnt, name)

def check_file(name, want_size, blocks, direct=False):
    try:
        st = os.stat(path(name))
    except OSError as e:
        return fail("%s: stat: %s" % (name, e))
    if st.st_size != want_size:
        fail("%s: st_size %d, expected %d" % (name, st.st_size, want_size))
    fd = os.open(path(name), os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        for off, data in blocks:
            if direct:
                m = mmap.mmap(-1, 4096)
                n = os.preadv(fd, [memoryview(m)[:len(data)]], off)
                got = m[:n]
            else:
                got = os.pread(fd, len(data), off)
            if got != data:
                fail("%s: %d bytes at %d read back wrong (%d bytes%s)"
                     % (name, len(data), off, len(got),
                        ", O_DIRECT" if direct else ""))
    except OSError as e:
        fail("%s: read: %s" % (name, e))
    finally:
        os.close(fd)

def seek(fd, off, whence):
    try:
        return os.lseek(fd, off, whence)
    except OSError as e:
        return -e.errno

if phase == "write":
    # One file per offset (its size is that write's end), buffered and
    # O_DIRECT, and one file holding all of them.
    allfd = os.open(path("all"), os.O_RDWR | os.O_CREAT, 0o644)
    for i, off in enumerate(OFFS):
        want = wlen(off)
        for kind, flags in (("buf", 0), ("dio", os.O_DIRECT)):
            name = "%s%d" % (kind, i)
            fd = os.open(path(name), os.O_RDWR | os.O_CREAT | flags, 0o644)
            try:
                data = block(name, off)[:want]
                n = os.pwritev(fd, [aligned(data)], off) if flags else os.pwrite(fd, data, off)
                if n != want:
                    fail("%s: pwrite at %d returned %d, expected %d" % (name, off, n, want))
                os.fsync(fd)
            except OSError as e:
                fail("%s: write/fsync at %d: %s" % (name, off, e))
            os.close(fd)
        try:
            os.pwrite(allfd, block("all", off)[:wlen(off)], off)
        except OSError as e:
            fail("all: pwrite at %d: %s" % (off, e))
    try:
        os.fsync(allfd)
    except OSError as e:
        fail("all: fsync: %s" % e)
    # SEEK_DATA / SEEK_HOLE walk the blocks out there.
    want = [(0, os.SEEK_DATA, OFFS[0]), (OFFS[0], os.SEEK_HOLE, OFFS[0] + 4096),
            (OFFS[0] + 4096, os.SEEK_DATA, OFFS[1]), (OFFS[2] + 4096, os.SEEK_DATA, OFFS[3]),
            (OFFS[3], os.SEEK_HOLE, MAXB), (OFFS[2] + 1, os.SEEK_DATA, OFFS[2] + 1),
            (OFFS[2] + 4096, os.SEEK_HOLE, OFFS[2] + 4096)]
    for off, whence, exp in want:
        got = seek(allfd, off, whence)
        if got != exp:
            fail("all: lseek(%d, %s) = %d, expected %d" % (
                off, "SEEK_DATA" if whence == os.SEEK_DATA else "SEEK_HOLE", got, exp))
    # copy_file_range to 2^62 + 8192.
    cfd = os.open(path("copy"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        n = os.copy_file_range(allfd, cfd, 4096, OFFS[1], OFFS[2] + 8192)
        if n != 4096:
            fail("copy_file_range returned %d" % n)
        os.fsync(cfd)
    except OSError as e:
        fail("copy_file_range: %s" % e)
    os.close(cfd)
    os.close(allfd)
else:
    for i, off in enumerate(OFFS):
        n = wlen(off)
        for kind in ("buf", "dio"):
            name = "%s%d" % (kind, i)
            want = [(off, block(name, off)[:n]), (off - 4096, bytes(4096))]
            check_file(name, off + n, want)
            check_file(name, off + n, want, direct=True)
    check_file("all", MAXB, [(o, block("all", o)[:wlen(o)]) for o in OFFS])
    check_file("copy", OFFS[2] + 12288, [(OFFS[2] + 8192, block("all", OFFS[1]))])
sys.exit(1 if bad else 0)
EOF

hugeoff() { python3 "$T/hugeoff.py" "$MNT" "$1" || h_fail "hugeoff $1 (see above)"; }

# expect_size FILE BYTES WHAT
expect_size() {
	local s
	s=$(stat -c %s "$1")
	[[ $s == "$2" ]] || h_fail "$3: $1 has size $s, expected $2"
}

# expect_block FILE OFFSET HEX-BYTE WHAT: the 4 KiB at OFFSET are all that byte.
expect_block() {
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY)
sys.exit(os.pread(fd, 4096, int(sys.argv[2])) != bytes.fromhex(sys.argv[3]) * 4096)' "$1" "$2" "$3" ||
		h_fail "$4: 4 KiB at $2 of $1 are not all 0x$3"
}

P49=$((1 << 49))
P50=$((1 << 50))
P62=$((1 << 62))

h_setup 2 256M
h_mount
h_log "writes at 2^49, 2^50, 2^62, 2^63-8192, 2^63-4096 (buffered and O_DIRECT)"
hugeoff write

# fallocate: mode 0 extends, KEEP_SIZE does not; punch and zero range out
# there; truncate up and down across 2^50.
h_log "fallocate, punch, zero range, truncate"
fallocate -o $((P62 + 8192)) -l 8192 "$MNT/fa" || h_fail "fallocate mode 0 at 2^62"
expect_size "$MNT/fa" $((P62 + 16384)) "fallocate mode 0"
fallocate -n -o $((P62 + 65536)) -l 4096 "$MNT/fa" || h_fail "fallocate KEEP_SIZE at 2^62"
expect_size "$MNT/fa" $((P62 + 16384)) "fallocate KEEP_SIZE"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT); os.pwrite(fd, b"\xab" * 16384, int(sys.argv[2])); os.fsync(fd)' \
	"$MNT/pz" "$P50" || h_fail "write pz"
fallocate -p -o "$P50" -l 4096 "$MNT/pz" || h_fail "punch at 2^50"
fallocate -z -o $((P50 + 8192)) -l 4096 "$MNT/pz" || h_fail "zero range at 2^50"
expect_size "$MNT/pz" $((P50 + 16384)) "punch and zero range keep the size"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT); os.pwrite(fd, b"\xcd" * 4096, int(sys.argv[2])); os.fsync(fd)' \
	"$MNT/tr" $((P62 - 4096)) || h_fail "write tr"
truncate -s $((P62 + 100)) "$MNT/tr" || h_fail "truncate up to 2^62 + 100"
truncate -s $((P50 + 4096)) "$MNT/tr" || h_fail "truncate down to 2^50 + 4096"
truncate -s $((P62)) "$MNT/tr" || h_fail "truncate up to 2^62"
sync "$MNT/fa" "$MNT/pz" "$MNT/tr"

h_log "scrub"
out=$("$CTL" scrub start "$MNT" --wait 2>&1) || h_fail "scrub failed: $out"
grep -q "unrecoverable: 0" <<<"$out" || h_fail "scrub: $out"
h_umount

h_log "fsck.twinfs -n"
out=$("$FSCK" -n "${IMGS[@]}" 2>&1) || { echo "$out" | tail -n 20 >&2; h_fail "fsck.twinfs -n is not clean"; }

h_mount
h_log "after remount: sizes and data"
hugeoff check
expect_size "$MNT/fa" $((P62 + 16384)) "fallocate after remount"
expect_block "$MNT/pz" "$P50" 00 "punched block"
expect_block "$MNT/pz" $((P50 + 4096)) ab "block after the punch"
expect_block "$MNT/pz" $((P50 + 8192)) 00 "zeroed block"
expect_block "$MNT/pz" $((P50 + 12288)) ab "block after the zero range"
expect_size "$MNT/tr" "$P62" "truncate after remount"
expect_block "$MNT/tr" $((P62 - 4096)) 00 "block cut by the truncate to 2^50"
# Shrinking from the top of the range frees what was out there.
truncate -s 0 "$MNT/all" || h_fail "truncate all to 0"
rm -f "$MNT"/buf* "$MNT"/dio*
h_umount
out=$("$FSCK" -n "${IMGS[@]}" 2>&1) || { echo "$out" | tail -n 20 >&2; h_fail "fsck.twinfs -n after the removal"; }
h_log "ok"
