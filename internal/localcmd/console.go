package localcmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/machinewire"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/rpc"
)

// escapeByte (Ctrl-]) ends a console session, as in telnet.
const escapeByte = 0x1d

// Console returns the implementation of `corral instance console`: it looks
// the instance up over LUXI, then opens the serial console stream on its
// primary node with the master's certificate (so it needs read access to
// the master's key: root on the master).
func Console(d Dirs) func(ctx context.Context, instance string, stdin io.Reader, stdout io.Writer) error {
	return func(ctx context.Context, instance string, stdin io.Reader, stdout io.Writer) error {
		c, err := luxi.Dial(ctx, d.Socket())
		if err != nil {
			return fmt.Errorf("cannot reach corrald: %w", err)
		}
		rows, err := c.QueryInstances(ctx, []string{instance}, []string{"name", "uuid", "hypervisor", "pnode", "oper_state"}, false)
		if err != nil {
			c.Close()
			return err
		}
		if len(rows) != 1 {
			c.Close()
			return fmt.Errorf("instance %s not found", instance)
		}
		r := rows[0]
		if run, _ := r[4].(bool); !run {
			c.Close()
			return fmt.Errorf("instance %s is not running", instance)
		}
		pnode, _ := r[3].(string)
		name, _ := r[0].(string)
		uuid, _ := r[1].(string)
		hv, _ := r[2].(string)
		spec := nodeapi.InstanceSpec{Name: name, UUID: uuid, Hypervisor: hv}
		return attach(ctx, d, c, pnode, name, nodeapi.Console, nodeapi.ConsoleArgs{Instance: spec}, stdin, stdout)
	}
}

// attach opens a console stream (method, args) on node with the master's
// certificate and joins it to the terminal until Ctrl-] or its end. It
// closes c, the LUXI connection that found the node.
func attach(ctx context.Context, d Dirs, c *luxi.Client, node, what, method string, args any, stdin io.Reader, stdout io.Writer) error {
	nodes, err := c.QueryNodes(ctx, []string{node}, []string{"pip"}, false)
	if err != nil {
		c.Close()
		return err
	}
	info, err := c.QueryClusterInfo(ctx)
	c.Close()
	if err != nil {
		return err
	}
	if len(nodes) != 1 {
		return fmt.Errorf("node %s not found", node)
	}
	port := 0
	if p, ok := info["rpc_port"].(float64); ok {
		port = int(p)
	}
	ip, _ := nodes[0][0].(string)
	epoch := int64(0)
	if e, ok := info["epoch"].(float64); ok {
		epoch = int64(e)
	}
	md := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}.MasterDir()
	cert, err := os.ReadFile(filepath.Join(md, layout.MasterCertFile))
	if err != nil {
		return fmt.Errorf("the console needs the master's certificate (run as root on the master): %w", err)
	}
	key, err := os.ReadFile(filepath.Join(md, layout.MasterKeyFile))
	if err != nil {
		return fmt.Errorf("the console needs the master's key (run as root on the master): %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(md, layout.MasterCAFile))
	if err != nil {
		return err
	}
	client, err := rpc.NewClient(cert, key, ca, func() int64 { return epoch }, rpc.ClientOptions{})
	if err != nil {
		return err
	}
	conn, err := client.Stream(ctx, node, net.JoinHostPort(ip, strconv.Itoa(port)), method, args)
	if err != nil {
		return err
	}
	defer conn.Close()
	if f, ok := stdin.(*os.File); ok {
		if restore, err := makeRaw(int(f.Fd())); err == nil {
			defer restore()
			fmt.Fprintf(stdout, "Connected to %s's serial console; press Ctrl-] to leave.\r\n", what)
		}
	}
	done := make(chan error, 2)
	go func() { _, err := io.Copy(stdout, conn); done <- err }()
	go func() { done <- copyUntilEscape(conn, stdin) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == io.EOF {
		err = nil
	}
	return err
}

// MachineConsole attaches to a bare-metal machine's serial console through
// the node that conducts it (IPMI Serial-over-LAN for the ipmitool-sol
// console interface), as Console does for an instance.
func MachineConsole(d Dirs) func(ctx context.Context, machine string, stdin io.Reader, stdout io.Writer) error {
	return func(ctx context.Context, machine string, stdin io.Reader, stdout io.Writer) error {
		c, err := luxi.Dial(ctx, d.Socket())
		if err != nil {
			return fmt.Errorf("cannot reach corrald: %w", err)
		}
		var recs []machinewire.Record
		if err := c.Call(ctx, machinewire.MethodQuery, []any{[]string{machine}}, &recs); err != nil {
			c.Close()
			return err
		}
		if len(recs) != 1 || recs[0].Machine == nil {
			c.Close()
			return fmt.Errorf("machine %s not found", machine)
		}
		m := recs[0].Machine
		if m.Interfaces.Console == "" || m.Interfaces.Console == "no-console" {
			c.Close()
			return fmt.Errorf("machine %s has no console interface (set console_interface to ipmitool-sol)", machine)
		}
		if recs[0].ConductorNode == "" {
			c.Close()
			return fmt.Errorf("no online node conducts machine %s", machine)
		}
		args := nodeapi.MachineConsoleArgs{MachineBMC: nodeapi.MachineBMC{Machine: m.UUID, Driver: m.Driver, DriverInfo: m.DriverInfo},
			ConsoleInterface: m.Interfaces.Console}
		what := m.Name
		if what == "" {
			what = m.UUID
		}
		return attach(ctx, d, c, recs[0].ConductorNode, what, nodeapi.MachineConsole, args, stdin, stdout)
	}
}

// copyUntilEscape forwards input until the escape byte or EOF.
func copyUntilEscape(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 512)
	for {
		n, err := src.Read(buf)
		for i := 0; i < n; i++ {
			if buf[i] == escapeByte {
				if i > 0 {
					_, _ = dst.Write(buf[:i])
				}
				return nil
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// makeRaw puts a terminal in raw mode and returns how to restore it.
func makeRaw(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
