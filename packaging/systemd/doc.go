// Package systemd holds Corral's packaged systemd units (corrald.service,
// corral-node.service, corral-rapi.service, corral.target) and its
// sysusers.d and tmpfiles.d entries. It has no code: its test checks the
// files against systemd's own tools and against the users, directories and
// defaults the daemons use (docs/SECURITY.md).
package systemd
