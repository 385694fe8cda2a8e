# Shared by probe.sh and status.sh (each ships it inline where its `#@include xid.sh` line stands): the
# NVIDIA driver's Xid reports in the kernel log since boot. Needs $T (a timeout(1) prefix, or empty).
# xid_scan SOURCE: the NVIDIA driver's Xid lines in the kernel log on stdin, with what the reading tool said on
# its stderr ("@err LINE") and its exit status ("@rc N"), counted per GPU and code with the last line (cut to 300
# characters; at most 64 pairs). Exit 0 when SOURCE read the kernel log. A denial is judged from the tool's own
# stderr and status only: a kernel line's text (any process can log "Operation not permitted") never hides Xids.
xid_scan() {
  awk -v src="$1" '
    /^@rc [0-9]+$/ { rc = $2; next }
    /^@err / { if (/insufficient permissions|not seeing messages from other users|Operation not permitted|No journal files were/) d = 1
               next }
    { n++ }
    /NVRM: Xid \(PCI:/ {
      s = $0; sub(/.*NVRM: Xid \(PCI:/, "", s); p = s; sub(/\).*/, "", p)
      c = s; sub(/^[^)]*\): */, "", c); sub(/[^0-9].*/, "", c)
      if (c == "" || length(c) > 4 || p !~ /^[0-9a-fA-F:.]+$/ || length(p) > 16) next
      k = p " " c; if (!(k in cnt)) { if (nk >= 64) next; keys[++nk] = k }
      cnt[k]++; last[k] = substr($0, 1, 300)
    }
    END { printf "source %s rc=%d lines=%d%s\n", src, rc, n, d ? " denied" : ""
          for (i = 1; i <= nk; i++) printf "xid %s %d %s\n", keys[i], cnt[keys[i]], last[keys[i]]
          exit (rc == 0 && n > 0 && !d) ? 0 : 1 }'
}
# xid_read SOURCE COMMAND...: COMMAND's stdout as is, its stderr as "@err" lines, then "@rc N", into xid_scan.
xid_read() {
  xr_src=$1; shift
  { { "$@" 2>&1 >&3 3>&-; echo "@rc $?" >&3; } | sed 's/^/@err /' >&3; } 3>&1 | xid_scan "$xr_src"
}
# kernel_log: Xid events since boot from journalctl -k, or dmesg where the journal cannot say (no kernel lines
# for this login, no journal); each under the deadline.
kernel_log() {
  if command -v journalctl >/dev/null 2>&1; then
    xid_read journalctl $T journalctl -k -b -q --no-pager -o short-monotonic && return 0
  fi
  command -v dmesg >/dev/null 2>&1 || { echo "source dmesg rc=127 lines=0"; return 1; }
  xid_read dmesg $T dmesg
}
