#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Description: the man pages are lint-clean (mandoc -Tlint) and name every
# mount option, mkfs/fsck option and twinfs-ctl command the binaries offer;
# the bash completion of twinfs-ctl completes commands, sub-commands,
# options and mounted twinfs file systems; every test source opens with a
# Description: line.
set -euo pipefail
: "${TWINFS:?}" "${MKFS:?}" "${CTL:?}" "${FSCK:?}" "${MANDIR:?}" "${COMPLETION:?}"

fails=0
fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

# ---- lint ----
if command -v mandoc >/dev/null; then
	for page in "$MANDIR"/*.8; do
		if ! out=$(mandoc -Tlint -Wwarning "$page" 2>&1); then
			fail "mandoc -Tlint $(basename "$page"): $out"
		fi
	done
else
	echo "SKIP (lint only): mandoc is not installed (scripts/deps.sh installs it)"
fi

# ---- every option the binaries offer is documented ----
# Mount options from twinfs --help: "-o name" or "-o name=VALUE".
# Only twinfs's own section: libfuse's generic options follow it.
mapfile -t mopts < <("$TWINFS" --help 2>&1 |
	sed -n '/^twinfs options:/,/^$/s/^ *-o \([a-z0-9_]*\).*/\1/p')
((${#mopts[@]} >= 5)) || fail "twinfs --help lists only ${#mopts[@]} -o options"
for o in "${mopts[@]}"; do
	grep -Eq "^\.It .*Cm $o( |\$)" "$MANDIR/twinfs.8" ||
		fail "twinfs.8 does not document -o $o"
done
# mkfs and fsck flags from their usage text.
for f in $("$MKFS" -h 2>&1 | sed -n 's/^ *-\([a-zA-Z]\) .*/\1/p'); do
	grep -Eq "^\.It Fl $f( |\$)" "$MANDIR/mkfs.twinfs.8" || fail "mkfs.twinfs.8 does not document -$f"
done
for f in $("$FSCK" -h 2>&1 | sed -n 's/^ *-\([a-zA-Z]\) .*/\1/p'); do
	grep -Eq "^\.It .*Fl $f( |\$)" "$MANDIR/fsck.twinfs.8" || fail "fsck.twinfs.8 does not document -$f"
done
# twinfs-ctl commands and long options from its usage text.
usage=$("$CTL" --help 2>&1 || true)
for c in $(sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' <<<"$usage" | sort -u); do
	grep -Eq "^\.Cm $c( |\$)|^\.It Cm $c( |\$)" "$MANDIR/twinfs-ctl.8" ||
		fail "twinfs-ctl.8 does not document the command $c"
done
for o in $(grep -o -- '--[a-z][a-z-]*' <<<"$usage" | sort -u); do
	grep -Eq "Fl -${o#--}( |\$)" "$MANDIR/twinfs-ctl.8" || fail "twinfs-ctl.8 does not document $o"
done

# ---- bash completion ----
# Complete "twinfs-ctl WORDS... CUR" and print the candidates, one a line.
complete_words() {
	bash -c '
		source "$1"; shift
		COMP_WORDS=(twinfs-ctl "$@"); COMP_CWORD=$(($# ))
		_twinfs_ctl
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMPLETION" "$@"
}
expect() {
	local want=$1
	shift
	local got
	got=$(complete_words "$@")
	grep -qx -- "$want" <<<"$got" ||
		fail "completion of '$*' lacks '$want' (got: $(complete_words "$@" | tr '\n' ' '))"
}
expect scrub sc
expect status st
expect replace re
expect start scrub st
expect cancel scrub c
expect --wait scrub start /x --w
expect --json status /x --j
expect --check status /x --c
expect --prometheus stats /x --p
expect trim tr
expect status trim st
# Commands offered by completion are the ones twinfs-ctl knows.
for c in $(complete_words ''); do
	grep -q "^  $c " <<<"$usage" || fail "completion offers '$c', which twinfs-ctl --help does not list"
done

# ---- every test source says what it tests ----
# (liburing's rule: a Description: line in the opening comment.)
if [[ -n ${SRCDIR:-} ]]; then
	# mapfile and [[ ]]: no process per file (forks are what is slow
	# on a loaded machine).
	while IFS= read -r -d '' f; do
		mapfile -n 12 head12 <"$f"
		[[ ${head12[*]} == *Description:* ]] ||
			fail "${f#"$SRCDIR"/} has no Description: line in its opening comment"
	done < <(find "$SRCDIR/tests" -type f \( -name '*.c' -o -name '*.h' -o -name '*.sh' \) -print0)
fi

if ((fails)); then
	echo "$fails failure(s)"
	exit 1
fi
echo "docs: man pages and completion OK"
