package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/baremetalapi"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// provisionVerb is one provision command: the API target it sends and the
// stable state --wait waits for ("" when it cannot wait).
type provisionVerb struct {
	name, target, stable, short, long string
}

// provisionVerbs are the provision commands of `openstack baremetal node`.
var provisionVerbs = []provisionVerb{
	{"manage", "manage", "manageable", "Move a machine to manageable (verifying its BMC access)", ""},
	{"provide", "provide", "available", "Make a manageable machine available (cleaning it first when automated cleaning is on)", ""},
	{"inspect", "inspect", "manageable", "Inspect a manageable machine's hardware", ""},
	{"deploy", "active", "active", "Deploy a machine: write its instance_info's image and boot it", ""},
	{"rebuild", "rebuild", "active", "Deploy an active machine's image again", ""},
	{"undeploy", "deleted", "available", "Tear down a deployed machine (and clean it)", ""},
	{"clean", "clean", "manageable", "Run manual clean steps on a manageable machine", ""},
	{"rescue", "rescue", "rescue", "Boot a deployed machine into the rescue system",
		`Boot the machine into the rescue ramdisk, where user "rescue" logs in with the
given password (and, a Corral extension, the given SSH public keys). The
password is hashed here (crypt SHA-256, or SHA-512 with --hash sha512): only
the hash leaves this command, and the cluster removes it when rescue ends.
Without --rescue-password or --rescue-password-file the password is asked
for on the terminal, not echoed.`},
	{"unrescue", "unrescue", "active", "Bring a rescued machine back to its deployed system", ""},
	{"abort", "abort", "", "Abort a machine's wait for its agent (clean, inspect, rescue)", ""},
}

// bmWaitOpts is --wait [SECONDS].
type bmWaitOpts struct {
	secs int
}

func addWaitFlag(cmd *cobra.Command, w *bmWaitOpts) {
	cmd.Flags().IntVar(&w.secs, "wait", -1, "wait until the machine reaches the action's stable state, at most SECONDS (--wait alone: no limit)")
	cmd.Flags().Lookup("wait").NoOptDefVal = "0"
}

// takeSeconds lets "--wait 600" work as in the openstack client, where
// the seconds are optional and may follow as a separate word: the flag
// parser takes "600" as an argument, so when --wait was given bare, the
// first all-digit argument is taken as its seconds if a machine remains.
func (w *bmWaitOpts) takeSeconds(cmd *cobra.Command, args []string) ([]string, error) {
	f := cmd.Flags().Lookup("wait")
	if f == nil || !f.Changed || w.secs != 0 || len(args) < 2 {
		return args, nil
	}
	for i, s := range args {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && strings.Trim(s, "0123456789") == "" {
			w.secs = n
			return append(args[:i:i], args[i+1:]...), nil
		}
	}
	return args, nil
}

func (a *app) bmProvisionCmd(v provisionVerb) *cobra.Command {
	var w bmWaitOpts
	var pw rescuePassword
	var cleanSteps string
	cmd := &cobra.Command{
		Use:     v.name + " NODE...",
		Short:   v.short,
		Long:    v.long,
		Example: fmt.Sprintf("  corral baremetal node %s bm1", v.name),
		Args:    minArgs(1, "at least one machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := w.takeSeconds(cmd, args)
			if err != nil {
				return err
			}
			op := map[string]any{"OP_ID": "OP_MACHINE_PROVISION", "target": v.target}
			switch v.name {
			case "rescue":
				hash, keys, err := pw.resolve(a, cmd)
				if err != nil {
					return err
				}
				op["rescue_password_hash"] = hash
				if len(keys) > 0 {
					op["ssh_public_keys"] = keys
				}
			case "clean":
				if cleanSteps == "" {
					return usagef("--clean-steps is required")
				}
				var steps []any
				if err := json.Unmarshal([]byte(cleanSteps), &steps); err != nil {
					return paramErr("--clean-steps: not a JSON list: %v", err)
				}
				op["clean_steps"] = steps
			}
			return a.bmActions(cmd, args, op, v.stable, w)
		},
	}
	if v.stable != "" {
		addWaitFlag(cmd, &w)
		cmd.Example += fmt.Sprintf("\n  corral baremetal node %s bm1 --wait 600", v.name)
	}
	switch v.name {
	case "rescue":
		pw.flags(cmd)
		cmd.Example = "  corral baremetal node rescue bm1 --rescue-password-file pw.txt --ssh-public-key ~/.ssh/id_ed25519.pub --wait\n  corral baremetal node rescue bm1 --wait   # asks for the password"
	case "clean":
		cmd.Flags().StringVar(&cleanSteps, "clean-steps", "", `the clean steps, a JSON list such as '[{"interface": "deploy", "step": "erase_devices_metadata"}]'`)
	}
	return cmd
}

// bmActions submits op for each machine and, with --wait, follows each to
// stable.
func (a *app) bmActions(cmd *cobra.Command, machines []string, op map[string]any, stable string, w bmWaitOpts) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	return a.env.withClient(ctx, func(c *luxi.Client) error {
		for _, n := range machines {
			op["machine"] = n
			id, err := machineSubmit(ctx, c, op)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: %s accepted (job %d)\n", n, op["target"], id)
		}
		if stable == "" || w.secs < 0 {
			return nil
		}
		for _, n := range machines {
			if err := a.waitProvision(ctx, c, out, n, stable, w.secs); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitProvision polls machine n until it is in state want, with the
// openstack client's rules: an error or "... failed" state fails, and so
// does any other state with no target (the action ended elsewhere). Each
// state seen is printed once. secs 0: no limit.
func (a *app) waitProvision(ctx context.Context, c *luxi.Client, out io.Writer, n, want string, secs int) error {
	var deadline time.Time
	if secs > 0 {
		deadline = a.env.now().Add(time.Duration(secs) * time.Second)
	}
	poll := a.env.bmPoll
	if poll == 0 {
		poll = bmPoll
	}
	last := ""
	for {
		m, err := machineGet(ctx, c, n)
		if err != nil {
			return err
		}
		seen := m.ProvisionState
		if m.TargetProvisionState != "" {
			seen += " (target " + m.TargetProvisionState + ")"
		}
		if seen != last {
			fmt.Fprintf(out, "%s: %s\n", n, seen)
			last = seen
		}
		if err := provisionOutcome(m, want); err != nil || m.ProvisionState == want {
			return err
		}
		if !deadline.IsZero() && !a.env.now().Before(deadline) {
			return ecode.Errorf(ecode.State, "Timeout reached while waiting for provision state %q on node %s (still %q)", want, n, m.ProvisionState)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// provisionOutcome says whether m's state means the wait for want has
// failed: the openstack client's wait_for_provision_state rules.
func provisionOutcome(m *config.Machine, want string) error {
	st := m.ProvisionState
	switch {
	case st == want:
		return nil
	case st == "error" || strings.HasSuffix(st, " failed"):
		return ecode.Errorf(ecode.State, "Node %s failed to reach state %s. It's in state %s. Last error: %s", m.UUID, want, st, m.LastError)
	case m.TargetProvisionState == "":
		return ecode.Errorf(ecode.State, "Node %s failed to reach state %s. It's in unexpected stable state %s. Last error: %s", m.UUID, want, st, m.LastError)
	}
	return nil
}

// rescuePassword is how rescue gets its password and keys.
type rescuePassword struct {
	clear, file, alg string
	keyFiles         []string
}

func (p *rescuePassword) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.clear, "rescue-password", "", "the rescue user's password (visible in the process list; prefer --rescue-password-file or the prompt)")
	f.StringVar(&p.file, "rescue-password-file", "", `read the password from the first line of this file ("-": standard input)`)
	f.StringVar(&p.alg, "hash", string(cryptpw.Default), "crypt algorithm of the password's hash: sha256 or sha512")
	f.StringArrayVar(&p.keyFiles, "ssh-public-key", nil, "file of SSH public keys the rescue user accepts (repeatable; Corral only)")
}

// resolve reads the password, checks it, hashes it and reads the keys.
func (p *rescuePassword) resolve(a *app, cmd *cobra.Command) (string, []string, error) {
	alg, err := cryptpw.ParseAlgorithm(p.alg)
	if err != nil {
		return "", nil, paramErr("--hash: %s", err.Error())
	}
	clear := p.clear
	switch {
	case cmd.Flags().Changed("rescue-password") && p.file != "":
		return "", nil, usagef("give --rescue-password or --rescue-password-file, not both")
	case cmd.Flags().Changed("rescue-password"):
	case p.file != "":
		clear, err = readPasswordFile(a, p.file)
		if err != nil {
			return "", nil, err
		}
	default:
		clear, err = a.promptPassword(cmd.ErrOrStderr())
		if err != nil {
			return "", nil, err
		}
	}
	if strings.TrimSpace(clear) == "" {
		return "", nil, paramErr(`A non-empty "rescue_password" is required when setting target provision state to rescue`)
	}
	hash, err := cryptpw.Hash(alg, clear)
	if err != nil {
		return "", nil, paramErr("the rescue password cannot be used: %s", err.Error())
	}
	var keys []string
	for _, f := range p.keyFiles {
		ks, err := readPublicKeys(f)
		if err != nil {
			return "", nil, err
		}
		keys = append(keys, ks...)
	}
	return hash, keys, nil
}

func readPasswordFile(a *app, path string) (string, error) {
	var r io.Reader
	if path == "-" {
		r = a.env.stdin()
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", ecode.Errorf(ecode.Environ, "--rescue-password-file: %s", err.Error())
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", ecode.Errorf(ecode.Environ, "--rescue-password-file: %s", err.Error())
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// readPublicKeys reads the SSH public keys of a file, one a line.
func readPublicKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "--ssh-public-key: %s", err.Error())
	}
	var keys []string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if f := strings.Fields(l); len(f) < 2 || !strings.HasPrefix(f[0], "ssh-") && !strings.HasPrefix(f[0], "ecdsa-") && !strings.HasPrefix(f[0], "sk-") {
			// The line is not quoted: a wrong file may hold a secret.
			return nil, paramErr("--ssh-public-key %s: line %d is not an SSH public key", path, i+1)
		}
		keys = append(keys, l)
	}
	if len(keys) == 0 {
		return nil, paramErr("--ssh-public-key %s: no key in the file", path)
	}
	return keys, nil
}

// promptPassword asks for the password twice on the terminal, with echo
// off; without a terminal it refuses.
func (a *app) promptPassword(errw io.Writer) (string, error) {
	in := a.env.stdin()
	f, ok := in.(*os.File)
	if !ok || !a.env.isTerminal(in) {
		return "", paramErr("no rescue password: give --rescue-password-file FILE (or - for standard input), or run on a terminal to be asked")
	}
	read := func(prompt string) (string, error) {
		fmt.Fprint(errw, prompt)
		defer fmt.Fprintln(errw)
		return readNoEcho(f)
	}
	p1, err := read("Rescue password: ")
	if err != nil {
		return "", err
	}
	p2, err := read("Repeat: ")
	if err != nil {
		return "", err
	}
	if p1 != p2 {
		return "", paramErr("the passwords differ")
	}
	return p1, nil
}

// readNoEcho reads a line from terminal f with echo turned off.
func readNoEcho(f *os.File) (string, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", ecode.Errorf(ecode.Environ, "reading the terminal: %s", err.Error())
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", ecode.Errorf(ecode.Environ, "reading the terminal: %s", err.Error())
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old) //nolint:errcheck // best effort restore
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := f.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				break
			}
			b = append(b, one[0])
		}
		if err != nil {
			if err == io.EOF {
				break
			}
			return "", ecode.Errorf(ecode.Environ, "reading the terminal: %s", err.Error())
		}
	}
	return strings.TrimRight(string(b), "\r"), nil
}

func (a *app) bmPowerCmd() *cobra.Command {
	power := newGroup("power", "Power a bare-metal machine on or off",
		"  corral baremetal node power on bm1\n  corral baremetal node power off --soft bm1")
	for _, p := range []struct{ verb, target, soft, short string }{
		{"on", "power on", "", "Power machines on"},
		{"off", "power off", "soft power off", "Power machines off"},
	} {
		var soft bool
		var timeout int
		cmd := &cobra.Command{
			Use:     p.verb + " NODE...",
			Short:   p.short,
			Example: "  corral baremetal node power " + p.verb + " bm1",
			Args:    minArgs(1, "at least one machine name or uuid"),
			RunE: func(cmd *cobra.Command, args []string) error {
				target := p.target
				if soft {
					target = p.soft
				}
				return a.bmActions(cmd, args, map[string]any{"OP_ID": "OP_MACHINE_POWER", "target": target, "timeout": timeout}, "", bmWaitOpts{})
			},
		}
		if p.soft != "" {
			cmd.Flags().BoolVar(&soft, "soft", false, "ask the operating system to shut down (ACPI) instead of cutting power")
		}
		cmd.Flags().IntVar(&timeout, "power-timeout", 0, "seconds to wait for a soft power action (0: the driver's default)")
		power.AddCommand(cmd)
	}
	return power
}

// bmRebootCmd is `node reboot`.
func (a *app) bmRebootCmd() *cobra.Command {
	var soft bool
	var timeout int
	cmd := &cobra.Command{
		Use:     "reboot NODE...",
		Short:   "Reboot machines",
		Example: "  corral baremetal node reboot bm1\n  corral baremetal node reboot --soft bm1",
		Args:    minArgs(1, "at least one machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := "rebooting"
			if soft {
				target = "soft rebooting"
			}
			return a.bmActions(cmd, args, map[string]any{"OP_ID": "OP_MACHINE_POWER", "target": target, "timeout": timeout}, "", bmWaitOpts{})
		},
	}
	cmd.Flags().BoolVar(&soft, "soft", false, "ask the operating system to restart (ACPI) instead of resetting")
	cmd.Flags().IntVar(&timeout, "power-timeout", 0, "seconds to wait for a soft reboot (0: the driver's default)")
	return cmd
}

func (a *app) bmMaintenanceCmd() *cobra.Command {
	m := newGroup("maintenance", "Set or clear machines' maintenance mode",
		"  corral baremetal node maintenance set bm1 --reason 'disk swap'\n  corral baremetal node maintenance unset bm1")
	var reason string
	set := &cobra.Command{
		Use:     "set NODE... [--reason TEXT]",
		Short:   "Put machines in maintenance: no provision action runs on them",
		Example: "  corral baremetal node maintenance set bm1 --reason 'disk swap'",
		Args:    minArgs(1, "at least one machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.bmMaintenance(cmd, args, true, reason)
		},
	}
	set.Flags().StringVar(&reason, "reason", "", "why the machine is in maintenance")
	unset := &cobra.Command{
		Use:     "unset NODE...",
		Short:   "Take machines out of maintenance",
		Example: "  corral baremetal node maintenance unset bm1",
		Args:    minArgs(1, "at least one machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.bmMaintenance(cmd, args, false, "")
		},
	}
	m.AddCommand(set, unset)
	return m
}

func (a *app) bmMaintenance(cmd *cobra.Command, machines []string, on bool, reason string) error {
	ctx := cmd.Context()
	return a.env.withClient(ctx, func(c *luxi.Client) error {
		for _, n := range machines {
			if _, err := machineSubmit(ctx, c, map[string]any{"OP_ID": "OP_MACHINE_MAINTENANCE", "machine": n,
				"maintenance": on, "maintenance_reason": reason}); err != nil {
				return err
			}
		}
		return nil
	})
}

func (a *app) bmValidateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate NODE",
		Short: "Check a machine's interfaces and driver_info",
		Long: `Check, without touching the hardware, that the driver_info has what the power
and management drivers need and which interfaces are supported.`,
		Example: "  corral baremetal node validate bm1",
		Args:    exactArgs(1, "a machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				m, err := machineGet(ctx, c, args[0])
				if err != nil {
					return err
				}
				res, err := baremetalapi.ValidateMachine(m)
				if err != nil {
					return err
				}
				names := make([]string, 0, len(res))
				for k := range res {
					names = append(names, k)
				}
				sort.Strings(names)
				objs := make([]map[string]any, len(names))
				for i, k := range names {
					var reason any
					if res[k].Reason != "" {
						reason = res[k].Reason
					}
					objs[i] = map[string]any{"interface": k, "result": res[k].Result, "reason": reason}
				}
				o := bmOutput{listOpts{output: output}}
				return a.writeObjects(cmd.OutOrStdout(), &o, []string{"interface", "result", "reason"}, objs)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `"json" prints the results as JSON`)
	return cmd
}
