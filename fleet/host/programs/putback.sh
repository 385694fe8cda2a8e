# fleet-putback PATH SHA256: PATH becomes the file write.sh kept beside it (.BASE.kept-by-fleet.SHA256) by
# link(2) and rename(2): no data is written, so it works on a full disk (what served goes back when the disk
# filled half-way through a release). The kept file is checked against SHA256 first and stays for a later
# put-back. Exit 3: no such kept file, or it no longer matches (the caller writes the release's copy instead);
# 65: PATH is a symlink or not a plain file; 74: the link or rename failed (the caller writes instead); PATH is
# as it was.
set -u
path=$1 want=$2
dir=$(dirname -- "$path") base=$(basename -- "$path")
case $want in *[!0-9a-f]*|'') echo "not a sha256: $want" >&2; exit 64;; esac
kept="$dir/.$base.kept-by-fleet.$want"
if [ -L "$kept" ] || [ ! -f "$kept" ]; then exit 3; fi
if [ -L "$path" ] || { [ -e "$path" ] && [ ! -f "$path" ]; }; then
    echo "it is a symlink or not a plain file; fleet replaces only plain files" >&2
    exit 65
fi
[ "$(sha256sum < "$kept" | cut -c1-64)" = "$want" ] || exit 3
tmp="$dir/.$base.fleet-$$-$(date +%s%N)"
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
ln -T -- "$kept" "$tmp" || exit 74
mv -fT -- "$tmp" "$path" || exit 74
sync -- "$dir" 2>/dev/null
trap - EXIT
