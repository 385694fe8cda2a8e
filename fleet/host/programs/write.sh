# fleet-write PATH MODE [keep]: stdin becomes PATH, atomically, as whoever runs it (root through sudo on a become
# host). Never half a file, never a secret readable on the way, the owner kept:
# - a symlink (or anything but a plain file) at PATH is refused, exit 65; nothing is written;
# - a temp file in the same folder, created exclusively (noclobber), mode 0600 from the start (umask) and
#   MODE before any data;
# - the old file's owner and group given to it (the writer's, root's under sudo, when there was none);
# - the data synced, the temp renamed over PATH, the folder synced. On any failure the temp is removed and
#   PATH is as it was.
# - with `keep`, the old file first stays as a hardlink beside it, named by its sha256
#   (.BASE.kept-by-fleet.SHA256): putback.sh puts it back by rename, which needs no free space.
set -u
path=$1 mode=$2 keep=${3:-}
dir=$(dirname -- "$path") base=$(basename -- "$path")
if [ -L "$path" ]; then
    echo "it is a symlink; fleet replaces only plain files (remove the link or point the setting at the real file)" >&2
    exit 65
fi
if [ -e "$path" ] && [ ! -f "$path" ]; then
    echo "it is not a plain file" >&2
    exit 65
fi
if [ "$keep" = keep ] && [ -f "$path" ]; then
    # best effort: a link needs no data blocks; a failure here only means a later put-back writes instead
    sum=$(sha256sum < "$path" | cut -c1-64) && kept="$dir/.$base.kept-by-fleet.$sum" &&
        { [ -f "$kept" ] || ln -T -- "$path" "$kept" 2>/dev/null; } || true
fi
tmp="$dir/.$base.fleet-$$-$(date +%s%N)"
umask 077
# exclusive create; in a subshell, since a failed redirection of `:` ends the shell that runs it
( set -C; : > "$tmp" ) 2>/dev/null || { echo "cannot create a temporary file in $dir" >&2; exit 73; }
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
chmod "$mode" "$tmp" || exit 1
if [ -e "$path" ]; then chown --reference="$path" -- "$tmp" || exit 1; fi
cat > "$tmp" || exit 74
sync -- "$tmp" && mv -fT -- "$tmp" "$path" && sync -- "$dir" || exit 74
trap - EXIT
