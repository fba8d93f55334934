// Package poolfw keeps the host firewall rules that stop qemu processes
// running under uids from the cluster's uid pool from opening network
// connections on the node (corral-node --pool-firewall=nftables).
//
// A confined qemu needs no host sockets of its own to the outside: the
// guest's traffic goes through tap devices, which netfilter sees as packets
// entering the host, not as packets a local socket sends. What a compromised
// qemu could do with a socket is reach the node daemon, etcd or the
// management network from the node itself, and that is what the rules take
// away. Connections made TO qemu (a VNC console on a TCP port) still work:
// the rules let established and related traffic out and drop the rest.
//
// The rules live in a table of their own, inet corral, with one output
// chain, replaced as a whole in one nft transaction so that no moment exists
// with a half-written rule set, and leaving every other table alone.
package poolfw

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/uidpool"
)

// Modes of the node option.
const (
	ModeNone     = "none"
	ModeNftables = "nftables"
)

// Table and Chain name what the package owns in nftables: table inet
// corral, chain output.
const (
	Table = "corral"
	Chain = "output"
)

// ParseMode checks the node option's value; "" is ModeNone.
func ParseMode(s string) (string, error) {
	switch s {
	case "", ModeNone:
		return ModeNone, nil
	case ModeNftables:
		return ModeNftables, nil
	}
	return "", ecode.Errorf(ecode.Inval, "pool firewall %q: use %s or %s", s, ModeNftables, ModeNone)
}

// Nft drives the nft command.
type Nft struct {
	// Netns is a named network namespace to work in (run through "ip
	// netns exec"); "" is the caller's own.
	Netns string
	// NftBinary defaults to "nft" in PATH; IPBinary to "ip".
	NftBinary string
	IPBinary  string
}

// Check tells whether nft can be run and can read the rule set: a node
// started with the option on refuses to go on without it.
func (n Nft) Check(ctx context.Context) error {
	bin := n.binary()
	if _, err := exec.LookPath(bin); err != nil {
		return ecode.Errorf(ecode.Environ, "pool firewall: nft is not installed (install nftables, or run with --pool-firewall=%s): %v", ModeNone, err)
	}
	_, err := n.run(ctx, nil, "list", "tables")
	return err
}

// Ensure makes the table and chain exist and replaces the chain's rules with
// the ones for uids: sockets of those uids may send on established and
// related connections only. An empty uids leaves the chain empty.
func (n Nft) Ensure(ctx context.Context, uids uidpool.Pool) error {
	_, err := n.run(ctx, []byte(Script(uids)), "-f", "-")
	return err
}

// Remove deletes the table, if it exists.
func (n Nft) Remove(ctx context.Context) error {
	ok, err := n.hasTable(ctx)
	if err != nil || !ok {
		return err
	}
	_, err = n.run(ctx, nil, "delete", "table", "inet", Table)
	return err
}

func (n Nft) hasTable(ctx context.Context) (bool, error) {
	out, err := n.run(ctx, nil, "list", "tables", "inet")
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(out)) {
		if strings.TrimSpace(line) == "table inet "+Table {
			return true, nil
		}
	}
	return false, nil
}

// List returns the chain's rules as nft prints them, "" when the table does
// not exist: for operators and tests, not for parsing.
func (n Nft) List(ctx context.Context) (string, error) {
	ok, err := n.hasTable(ctx)
	if err != nil || !ok {
		return "", err
	}
	out, err := n.run(ctx, nil, "list", "chain", "inet", Table, Chain)
	return string(out), err
}

// Script is the nft transaction Ensure runs. Declaring the table and chain
// adds them when missing and is a no-op otherwise; the flush and the new
// rules then apply atomically with it.
func Script(uids uidpool.Pool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain %s {\n\t\ttype filter hook output priority filter; policy accept;\n\t}\n}\n", Table, Chain)
	fmt.Fprintf(&b, "flush chain inet %s %s\n", Table, Chain)
	set := uidSet(uids)
	if set == "" {
		return b.String()
	}
	fmt.Fprintf(&b, "add rule inet %s %s meta skuid %s ct state established,related accept\n", Table, Chain, set)
	fmt.Fprintf(&b, "add rule inet %s %s meta skuid %s counter drop\n", Table, Chain, set)
	return b.String()
}

// uidSet writes uids as an nft anonymous set, "{ 2000-2099, 3000 }", with
// overlapping and adjacent ranges merged (nft refuses overlapping intervals
// in one set); "" for no uids.
func uidSet(uids uidpool.Pool) string {
	merged := Merge(uids)
	if len(merged) == 0 {
		return ""
	}
	items := make([]string, len(merged))
	for i, r := range merged {
		items[i] = r.String()
	}
	return "{ " + strings.Join(items, ", ") + " }"
}

// Merge returns the uids as sorted, disjoint, non-adjacent ranges. Ranges
// with low > high are dropped.
func Merge(uids uidpool.Pool) uidpool.Pool {
	rs := make(uidpool.Pool, 0, len(uids))
	for _, r := range uids {
		if r.Low() <= r.High() {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b uidpool.Range) int {
		if a.Low() != b.Low() {
			return cmpU32(a.Low(), b.Low())
		}
		return cmpU32(a.High(), b.High())
	})
	var out uidpool.Pool
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && uint64(r.Low()) <= uint64(out[k].High())+1 {
			out[k][1] = max(out[k].High(), r.High())
			continue
		}
		out = append(out, r)
	}
	return out
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (n Nft) binary() string {
	if n.NftBinary != "" {
		return n.NftBinary
	}
	return "nft"
}

func (n Nft) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	bin := n.binary()
	if n.Netns != "" {
		ip := n.IPBinary
		if ip == "" {
			ip = "ip"
		}
		args = append([]string{"netns", "exec", n.Netns, bin}, args...)
		bin = ip
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, ecode.ExecErrorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// UIDs turns single uids (those of running instances) into one-uid ranges
// to add to a pool.
func UIDs(uids ...uint32) uidpool.Pool {
	p := make(uidpool.Pool, len(uids))
	for i, u := range uids {
		p[i] = uidpool.Range{u, u}
	}
	return p
}
