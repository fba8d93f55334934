package nodeserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// consoleIPMIToolSOL is the console interface of ipmi machines: the
// conductor's node runs ipmitool's Serial-over-LAN and carries it.
const consoleIPMIToolSOL = "ipmitool-sol"

// openMachineConsole starts the console session of a.
func openMachineConsole(ctx context.Context, a nodeapi.MachineConsoleArgs) (io.ReadWriteCloser, error) {
	if a.ConsoleInterface != consoleIPMIToolSOL {
		return nil, ecode.Errorf(ecode.Inval, "machine %s: console interface %q cannot stream a console (only %s can)",
			a.Machine, a.ConsoleInterface, consoleIPMIToolSOL)
	}
	d, err := machineDriver(a.MachineBMC)
	if err != nil {
		return nil, err
	}
	ipmi, ok := d.(*driver.IPMI)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "machine %s: console interface %s needs the ipmi driver, not %s",
			a.Machine, consoleIPMIToolSOL, a.Driver)
	}
	sol, err := ipmi.OpenSOL(ctx)
	if err != nil {
		return nil, fmt.Errorf("machine %s: serial console: %w", a.Machine, err)
	}
	return sol, nil
}

// machineConsole streams a machine's serial console between the client
// and its BMC until either side ends; the SOL session is deactivated when
// the client goes. A failure to start is written on the stream (the
// stream protocol carries no error reply) and logged.
func (s *Server) machineConsole(ctx context.Context, raw json.RawMessage, conn io.ReadWriter) error {
	var a nodeapi.MachineConsoleArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return ecode.Errorf(ecode.Inval, "machine console: bad arguments: %v", err)
	}
	s.log.Info("machine console", "machine", a.Machine, "driver", a.Driver, "console_interface", a.ConsoleInterface)
	c, err := openMachineConsole(ctx, a)
	if err != nil {
		err = redacted(err, bmcSecrets(a.MachineBMC)...)
		fmt.Fprintf(conn, "\r\nThe console of machine %s cannot be opened: %s\r\n", a.Machine, err)
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			s.log.Warn("machine console: ending the session", "machine", a.Machine,
				"err", redacted(err, bmcSecrets(a.MachineBMC)...))
		}
	}()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(c, conn); errc <- err }()
	go func() { _, err := io.Copy(conn, c); errc <- err }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	// The client leaving ends the session: its side reads as EOF, or as
	// closed when the stream was torn down first.
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return redacted(err, bmcSecrets(a.MachineBMC)...)
}
