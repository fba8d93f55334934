# Shared by the scripts of the tiny OS definition; sourced, not run.

fail() {
  echo "tiny: $*" >&2
  exit 1
}

# check_marker VALUE: the marker ends up on the guest's console line
# "CORRAL-GUEST-BOOTED name=... marker=...", which tests match on, so it must
# be one short word.
# Its messages never quote the value: it may have come as a secret parameter.
check_marker() {
  case "$1" in
    *[[:space:]]*) echo "marker must not contain whitespace"; return 1 ;;
    *\"* | *\'* | *\`*) echo "marker must not contain quotes"; return 1 ;;
  esac
  if [ "${#1}" -gt 64 ]; then
    echo "marker is ${#1} characters long, at most 64 are allowed"
    return 1
  fi
}

# disk_size PATH: size in bytes of a disk file or block device.
disk_size() {
  if [ -b "$1" ]; then
    blockdev --getsize64 "$1"
  else
    stat -c %s "$1"
  fi
}
