# Shared by probe.sh and status.sh (each ships it inline where its `#@include xid.sh` line stands): the
# NVIDIA driver's Xid reports in the kernel log since boot. Needs $T (a timeout(1) prefix, or empty).
# xid_scan SOURCE: the NVIDIA driver's Xid lines in the kernel log on stdin (then "@rc N"), counted per GPU and
# code with the last line (cut to 300 characters; at most 64 pairs). Exit 0 when SOURCE read the kernel log.
xid_scan() {
  awk -v src="$1" '
    /^@rc [0-9]+$/ { rc = $2; next }
    { n++ }
    /insufficient permissions|not seeing messages from other users|Operation not permitted|No journal files were/ { d = 1 }
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
# kernel_log: Xid events since boot from journalctl -k, or dmesg where the journal cannot say (no kernel lines
# for this login, no journal); each under the deadline.
kernel_log() {
  if command -v journalctl >/dev/null 2>&1; then
    { $T journalctl -k -b -q --no-pager -o short-monotonic 2>&1; echo "@rc $?"; } | xid_scan journalctl && return 0
  fi
  command -v dmesg >/dev/null 2>&1 || { echo "source dmesg rc=127 lines=0"; return 1; }
  { $T dmesg 2>&1; echo "@rc $?"; } | xid_scan dmesg
}
