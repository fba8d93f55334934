// Command corral-bmc is a baseboard management controller for qemu
// machines, for tests and development: the chassis control program of
// ipmi_sim, a Redfish service, and the writer of ipmi_sim's configuration.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/bmc"
)

const usage = `Usage:
  corral-bmc create NODEDIR --name NAME [--memory MB] [--network user|tap] [--mac MAC] ...
  corral-bmc chassis NODEDIR get power|boot ...
  corral-bmc chassis NODEDIR set power 0|1 | reset 1 | shutdown 1 | boot pxe|cdrom|bios|default ...
  corral-bmc redfish --listen ADDR --machine NAME=NODEDIR ... --cert FILE --key FILE --user USER --password-file FILE
  corral-bmc ipmi-config --dir DIR --machine NODEDIR --port PORT --user USER --password-file FILE [--sol IP:PORT]
  corral-bmc sol-bridge --machine NODEDIR [--listen IP:PORT]

A machine is a directory (NODEDIR) describing a qemu machine; 'create' writes
it. 'chassis' is ipmi_sim's chassis_control program; 'ipmi-config' writes
DIR/lan.conf and DIR/bmc.emu for 'ipmi_sim -c DIR/lan.conf -f DIR/bmc.emu -s
DIR/state -n' with corral-bmc as the chassis program; 'redfish' serves the
machines over Redfish with HTTP basic authentication. 'sol-bridge --machine
NODEDIR' carries the machine's serial console over TCP for ipmi_sim's
Serial-over-LAN (ipmi-config --sol IP:PORT points ipmi_sim at it).
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "corral-bmc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "create":
		return runCreate(args[1:])
	case "chassis":
		return runChassis(args[1:])
	case "redfish":
		return runRedfish(args[1:])
	case "ipmi-config":
		return runIPMIConfig(args[1:])
	case "sol-bridge":
		return runSOLBridge(args[1:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func runCreate(args []string) error {
	if len(args) < 1 || strings.HasPrefix(args[0], "-") {
		return errors.New("create needs NODEDIR first")
	}
	dir := args[0]
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	var c bmc.Config
	fs.StringVar(&c.Name, "name", "", "machine name (Redfish system id, qemu -name)")
	fs.IntVar(&c.MemoryMB, "memory", 0, "memory in MiB (256 when 0)")
	fs.StringVar(&c.Network, "network", "", "user, tap or empty for no network card")
	fs.StringVar(&c.MAC, "mac", "", "MAC address of the network card")
	fs.StringVar(&c.UserNetOptions, "user-net-options", "", "options appended to the user-mode -netdev")
	fs.StringVar(&c.Tap, "tap", "", "tap device (network tap)")
	fs.StringVar(&c.NetNS, "netns", "", "network namespace qemu runs in")
	fs.StringVar(&c.Disk, "disk", "", "raw disk image")
	fs.StringVar(&c.Kernel, "kernel", "", "kernel booted directly when booting from disk")
	fs.StringVar(&c.Initrd, "initrd", "", "initrd for --kernel")
	fs.StringVar(&c.Append, "append", "", "kernel command line for --kernel")
	fs.StringVar(&c.ISO, "iso", "", "ISO in the CD drive when no virtual media is inserted")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	_, err := bmc.Create(dir, c)
	return err
}

func runChassis(args []string) error {
	if len(args) < 3 {
		return errors.New("chassis needs NODEDIR get|set ...")
	}
	m, err := bmc.Open(args[0])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch args[1] {
	case "get":
		return bmc.ChassisGet(m, args[2:], os.Stdout)
	case "set":
		return bmc.ChassisSet(ctx, m, args[2:])
	}
	return fmt.Errorf("chassis operation %q is not get or set", args[1])
}

// machineFlags collects repeated --machine NAME=NODEDIR.
type machineFlags map[string]string

func (f machineFlags) String() string { return fmt.Sprint(map[string]string(f)) }
func (f machineFlags) Set(v string) error {
	name, dir, ok := strings.Cut(v, "=")
	if !ok || name == "" || dir == "" {
		return fmt.Errorf("--machine %q is not NAME=NODEDIR", v)
	}
	if _, dup := f[name]; dup {
		return fmt.Errorf("machine %s given twice", name)
	}
	f[name] = dir
	return nil
}

func readPasswordFile(path string) (string, error) {
	if path == "" {
		return "", errors.New("--password-file is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	pw := strings.TrimRight(string(data), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return pw, nil
}

func runRedfish(args []string) error {
	fs := flag.NewFlagSet("redfish", flag.ContinueOnError)
	machines := machineFlags{}
	listen := fs.String("listen", "127.0.0.1:8000", "address to serve on (port 0 picks one; the address is printed)")
	cert := fs.String("cert", "", "TLS certificate (PEM)")
	key := fs.String("key", "", "TLS key (PEM)")
	plain := fs.Bool("plain-http", false, "serve plain HTTP without TLS (local development only)")
	user := fs.String("user", "admin", "user name clients authenticate with")
	pwFile := fs.String("password-file", "", "file holding the password")
	fs.Var(machines, "machine", "NAME=NODEDIR, repeated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(machines) == 0 {
		return errors.New("at least one --machine NAME=NODEDIR is needed")
	}
	if (*cert == "" || *key == "") && !*plain {
		return errors.New("--cert and --key are required (or --plain-http)")
	}
	pw, err := readPasswordFile(*pwFile)
	if err != nil {
		return err
	}
	srv := &bmc.Redfish{Machines: map[string]*bmc.Machine{}, User: *user, Password: pw}
	for name, dir := range machines {
		m, err := bmc.Open(dir)
		if err != nil {
			return err
		}
		if m.Config.Name != name {
			return fmt.Errorf("machine directory %s is named %s, not %s", dir, m.Config.Name, name)
		}
		srv.Machines[name] = m
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.Default()}
	if !*plain {
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return fmt.Errorf("TLS key pair: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	fmt.Printf("corral-bmc redfish listening on %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

func runIPMIConfig(args []string) error {
	fs := flag.NewFlagSet("ipmi-config", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for lan.conf, bmc.emu and ipmi_sim's state")
	machine := fs.String("machine", "", "machine directory (NODEDIR)")
	addr := fs.String("addr", "127.0.0.1", "UDP address ipmi_sim listens on")
	port := fs.Int("port", 623, "UDP port ipmi_sim listens on")
	user := fs.String("user", "admin", "IPMI user name")
	pwFile := fs.String("password-file", "", "file holding the IPMI password")
	prog := fs.String("chassis-control", "", "chassis program (this corral-bmc when empty)")
	sol := fs.String("sol", "", "IP:PORT of the machine's sol-bridge: ipmi_sim then serves Serial-over-LAN")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *machine == "" {
		return errors.New("--dir and --machine are required")
	}
	m, err := bmc.Open(*machine)
	if err != nil {
		return err
	}
	pw, err := readPasswordFile(*pwFile)
	if err != nil {
		return err
	}
	if *prog == "" {
		if *prog, err = os.Executable(); err != nil {
			return fmt.Errorf("own path: %w", err)
		}
	}
	lan, emu, err := bmc.WriteIPMISimConfig(*dir, bmc.IPMISimConfig{
		Addr: *addr, Port: *port, User: *user, Password: pw,
		ChassisControl: []string{*prog, "chassis", m.Dir}, SOL: *sol,
	})
	if err != nil {
		return err
	}
	fmt.Printf("ipmi_sim -c %s -f %s -s %s -n\n", lan, emu, *dir+"/state")
	return nil
}

// runSOLBridge carries the machine's serial console between qemu's unix
// socket and TCP for ipmi_sim's Serial-over-LAN, until SIGTERM or SIGINT.
// It prints the address it listens on, as redfish does.
func runSOLBridge(args []string) error {
	fs := flag.NewFlagSet("sol-bridge", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "TCP address for ipmi_sim's sol \"tcp:IP:PORT\"")
	machine := fs.String("machine", "", "machine directory (NODEDIR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *machine == "" {
		return errors.New("--machine is required")
	}
	m, err := bmc.Open(*machine)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("sol-bridge listen: %w", err)
	}
	fmt.Printf("corral-bmc sol-bridge for %s listening on %s\n", m.Config.Name, l.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return bmc.NewSerialBridge(m).Serve(ctx, l)
}
