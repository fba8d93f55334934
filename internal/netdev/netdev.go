// Package netdev creates and removes the host side of instance NICs: one
// persistent tap device per NIC, attached to a bridge (bridged mode) or given
// a host route to the instance's IP (routed mode). It drives iproute2's ip
// command rather than netlink directly: every step is a command an operator
// can read in the logs and repeat by hand.
package netdev

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// NIC modes (Ganeti's nic_mode values).
const (
	ModeBridged = "bridged"
	ModeRouted  = "routed"
)

// maxIfName is IFNAMSIZ less the terminating NUL.
const maxIfName = 15

// Link is what the driver reads back about a network device.
type Link struct {
	Name    string
	Kind    string // "tun" for taps, "bridge", "veth", ... ("" for plain devices)
	TapType string // "tap" or "tun" for Kind "tun"
	Owner   string // user owning a persistent tap: a name, or a uid in decimal when it has none; "" when no owner
	Master  string // bridge the device is attached to
	Up      bool   // administratively up
}

// Links runs ip against one network namespace.
type Links struct {
	// Netns is the network namespace to work in ("ip -n"); "" is the
	// caller's own.
	Netns string
	// IPBinary defaults to "ip" in PATH.
	IPBinary string
	// MultiQueue makes the taps CreateTap creates multi-queue, which a
	// virtio NIC with more than one queue pair needs.
	MultiQueue bool
}

// commandTimeout bounds the package-level helpers, which take no context: a
// few ip invocations finish in milliseconds, so a stuck one means trouble.
const commandTimeout = 30 * time.Second

// CreateTap creates the tap in the caller's network namespace; see
// Links.CreateTap, which also takes a context.
func CreateTap(name, owner, mode, link, ip string) error {
	return CreateTapQueues(name, owner, mode, link, ip, false)
}

// CreateTapQueues is CreateTap with the tap multi-queue when multiQueue.
func CreateTapQueues(name, owner, mode, link, ip string, multiQueue bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	return Links{MultiQueue: multiQueue}.CreateTap(ctx, name, owner, mode, link, ip)
}

// DeleteTap removes the tap from the caller's network namespace; see
// Links.DeleteTap, which also takes a context.
func DeleteTap(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	return Links{}.DeleteTap(ctx, name)
}

// TapName derives a NIC's tap name from the node it is on, its instance's
// uuid and the NIC index: "crl" + the uuid's first 5 hex digits + 3 hex
// digits of a hash of the node's name + "n" + index, 13 to 15 characters
// for up to 1000 NICs, inside the kernel's 15-character limit. The node's
// part keeps apart the taps of one instance on two node daemons of one
// host (a migration between them needs both at once).
func TapName(node, instUUID string, idx int) string {
	hex := strings.ToLower(strings.ReplaceAll(instUUID, "-", ""))
	if len(hex) > 5 {
		hex = hex[:5]
	}
	h := fnv.New32a()
	h.Write([]byte(node))
	return fmt.Sprintf("crl%s%03xn%d", hex, h.Sum32()&0xfff, idx)
}

// CreateTap makes a persistent tap named name, owned by user owner (so an
// unprivileged qemu can open it; "" for root only), and brings it up. The
// owner is a user name or a numeric uid: a uid from the cluster's pool
// usually has no name. In
// bridged mode it is attached to the existing bridge link; in routed mode ip
// (if set) gets a host route through the tap, in routing table link when link
// is a number and in the main table otherwise.
//
// Calling it again for a tap that exists with the same owner re-applies the
// attachment and route, so a retried operation succeeds.
func (l Links) CreateTap(ctx context.Context, name, owner, mode, link, ip string) error {
	if err := checkIfName(name); err != nil {
		return err
	}
	var dst netip.Prefix
	switch mode {
	case ModeBridged:
		if err := checkIfName(link); err != nil {
			return ecode.Errorf(ecode.Inval, "bridged nic needs a bridge name: %v", err)
		}
	case ModeRouted:
		if ip != "" {
			addr, err := netip.ParseAddr(ip)
			if err != nil || addr.Zone() != "" {
				return ecode.Errorf(ecode.Inval, "routed nic: invalid IP address %q", ip)
			}
			dst = netip.PrefixFrom(addr, addr.BitLen())
		}
	default:
		return ecode.Errorf(ecode.Inval, "nic mode %q is not supported (use %s or %s)", mode, ModeBridged, ModeRouted)
	}
	if owner != "" && !validUser(owner) && !validUID(owner) {
		return ecode.Errorf(ecode.Inval, "invalid tap owner %q", owner)
	}

	if mode == ModeBridged {
		br, err := l.Link(ctx, link)
		if err != nil {
			return err
		}
		if br == nil || br.Kind != "bridge" {
			return ecode.Errorf(ecode.Environ, "bridge %s does not exist", link)
		}
	}

	cur, err := l.Link(ctx, name)
	if err != nil {
		return err
	}
	created := false
	switch {
	case cur == nil:
		args := []string{"tuntap", "add", "dev", name, "mode", "tap"}
		if owner != "" {
			args = append(args, "user", owner)
		}
		if l.MultiQueue {
			args = append(args, "multi_queue")
		}
		if _, err := l.run(ctx, args...); err != nil {
			return err
		}
		created = true
	case cur.Kind != "tun" || cur.TapType != "tap":
		return ecode.Errorf(ecode.Exists, "network device %s exists and is not a tap", name)
	case !sameOwner(cur.Owner, owner):
		return ecode.Errorf(ecode.Exists, "tap %s exists with owner %q, not %q", name, cur.Owner, owner)
	}

	err = l.setUp(ctx, name, mode, link, dst)
	if err != nil && created {
		// Leave nothing half-made behind.
		if _, derr := l.run(ctx, "link", "del", "dev", name); derr != nil {
			err = fmt.Errorf("%w (and removing the tap failed: %v)", err, derr)
		}
	}
	return err
}

func (l Links) setUp(ctx context.Context, name, mode, link string, dst netip.Prefix) error {
	if mode == ModeBridged {
		if _, err := l.run(ctx, "link", "set", "dev", name, "master", link); err != nil {
			return err
		}
	}
	if _, err := l.run(ctx, "link", "set", "dev", name, "up"); err != nil {
		return err
	}
	if mode == ModeRouted && dst.IsValid() {
		args := []string{"route", "replace", dst.String(), "dev", name}
		if table, err := strconv.ParseUint(link, 10, 32); err == nil {
			args = append(args, "table", strconv.FormatUint(table, 10))
		}
		if _, err := l.run(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// DeleteTap removes the tap; routes through it go with it. A missing device is
// not an error; a device that is not a tap is refused, so a wrong name cannot
// take down a bridge or an uplink.
func (l Links) DeleteTap(ctx context.Context, name string) error {
	if err := checkIfName(name); err != nil {
		return err
	}
	cur, err := l.Link(ctx, name)
	if err != nil || cur == nil {
		return err
	}
	if cur.Kind != "tun" {
		return ecode.Errorf(ecode.Inval, "refusing to delete %s: it is not a tap device", name)
	}
	_, err = l.run(ctx, "link", "del", "dev", name)
	return err
}

// Link returns the named device, nil when it does not exist.
func (l Links) Link(ctx context.Context, name string) (*Link, error) {
	// Listing everything avoids telling "no such device" from other
	// failures by the wording of ip's error message.
	out, err := l.run(ctx, "-j", "-d", "link", "show")
	if err != nil {
		return nil, err
	}
	links, err := parseLinks(out)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(links, func(k Link) bool { return k.Name == name })
	if i < 0 {
		return nil, nil
	}
	return &links[i], nil
}

func (l Links) run(ctx context.Context, args ...string) ([]byte, error) {
	bin := l.IPBinary
	if bin == "" {
		bin = "ip"
	}
	if l.Netns != "" {
		args = append([]string{"-n", l.Netns}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, ecode.ExecErrorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ipLink is the part of "ip -j -d link show" output this package reads.
type ipLink struct {
	IfName   string   `json:"ifname"`
	Flags    []string `json:"flags"`
	Master   string   `json:"master"`
	LinkInfo *struct {
		InfoKind string `json:"info_kind"`
		InfoData *struct {
			Type string `json:"type"`
			// User is a string for a uid with a name and a number for one
			// without.
			User json.RawMessage `json:"user"`
		} `json:"info_data"`
	} `json:"linkinfo"`
}

// parseLinks decodes the JSON output of "ip -j -d link show".
func parseLinks(data []byte) ([]Link, error) {
	var raw []ipLink
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("netdev: cannot parse ip's link list: %w", err)
	}
	out := make([]Link, 0, len(raw))
	for _, r := range raw {
		if r.IfName == "" {
			return nil, fmt.Errorf("netdev: ip listed a link without a name")
		}
		k := Link{Name: r.IfName, Master: r.Master, Up: slices.Contains(r.Flags, "UP")}
		if r.LinkInfo != nil {
			k.Kind = r.LinkInfo.InfoKind
			if d := r.LinkInfo.InfoData; d != nil && k.Kind == "tun" {
				owner, err := parseOwner(d.User)
				if err != nil {
					return nil, fmt.Errorf("netdev: link %s: %w", r.IfName, err)
				}
				k.TapType, k.Owner = d.Type, owner
			}
		}
		out = append(out, k)
	}
	return out, nil
}

func checkIfName(name string) error {
	if name == "" || len(name) > maxIfName || name == "." || name == ".." {
		return ecode.Errorf(ecode.Inval, "invalid network device name %q (1 to %d characters)", name, maxIfName)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return ecode.Errorf(ecode.Inval, "invalid network device name %q: character %q not allowed", name, r)
		}
	}
	if name[0] == '-' {
		return ecode.Errorf(ecode.Inval, "invalid network device name %q", name)
	}
	return nil
}

func validUser(s string) bool {
	if len(s) > 32 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r == '_' || i > 0 && (r >= '0' && r <= '9' || r == '-')
		if !ok {
			return false
		}
	}
	return true
}

// parseOwner reads a tap's "user" from ip's JSON: ip prints the user's name,
// or the bare uid when the user database has no name for it.
func parseOwner(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		return name, nil
	}
	var uid uint32
	if err := json.Unmarshal(raw, &uid); err != nil {
		return "", fmt.Errorf("tap owner %s is neither a name nor a uid", raw)
	}
	return strconv.FormatUint(uint64(uid), 10), nil
}

// validUID accepts a uid in decimal. (uid_t)-1 means "no owner" to the
// kernel, so it is not a uid one can give a tap to.
func validUID(s string) bool {
	if s == "" || len(s) > 10 || strings.TrimLeft(s, "0123456789") != "" {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return err == nil && n != 1<<32-1
}

// sameOwner tells whether a tap's owner as ip shows it (cur) is the one
// asked for (want): ip shows a name whenever the uid has one, so a tap
// created for uid 2000 reads back as "qemu2000" once that user exists, and
// one created for a name reads back as a number once the user is gone.
func sameOwner(cur, want string) bool {
	if cur == want {
		return true
	}
	if cur == "" || want == "" {
		return false
	}
	a, okA := ownerUID(cur)
	b, okB := ownerUID(want)
	return okA && okB && a == b
}

// ownerUID resolves a tap owner to its uid: digits are a uid, anything else
// a user name.
func ownerUID(s string) (uint32, bool) {
	if validUID(s) {
		n, _ := strconv.ParseUint(s, 10, 32)
		return uint32(n), true
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(n), err == nil
}
