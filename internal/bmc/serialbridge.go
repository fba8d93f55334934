package bmc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// SerialBridge carries a machine's serial console between qemu's unix
// socket and TCP, for ipmi_sim's Serial-over-LAN: ipmi_sim's `sol` device
// can be a serial line or "tcp:HOST:PORT", not a unix socket, and it
// connects once at start and again ten seconds after losing the line.
//
// A connection to the bridge outlives the machine's power cycles: while
// qemu is off (no socket to reach) the bridge keeps the TCP side open and
// drops what arrives, and it reaches the new qemu's socket within
// redialEvery of its start. qemu's serial socket serves one client at a
// time, so while ipmi_sim holds the bridge nothing else can attach to
// serial.sock; the serial log keeps recording everything.
type SerialBridge struct {
	Machine     *Machine
	redialEvery time.Duration
}

// NewSerialBridge returns the bridge of m.
func NewSerialBridge(m *Machine) *SerialBridge {
	return &SerialBridge{Machine: m, redialEvery: 200 * time.Millisecond}
}

// Serve accepts connections on l until ctx ends or l fails, carrying each
// one to the machine's serial socket.
func (b *SerialBridge) Serve(ctx context.Context, l net.Listener) error {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.carry(ctx, c)
		}()
	}
}

// carry serves one client until it or ctx goes, reattaching to qemu's
// socket whenever the machine powers on again.
func (b *SerialBridge) carry(ctx context.Context, client net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer client.Close()
	// One reader of the client for the connection's whole life: what it
	// sends goes to the current serial socket, or nowhere while off.
	var mu sync.Mutex
	var serial net.Conn
	go func() {
		defer cancel()
		buf := make([]byte, 4096)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				mu.Lock()
				s := serial
				mu.Unlock()
				if s != nil {
					s.Write(buf[:n]) // a failed write shows as EOF on the read side
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-ctx.Done()
		client.Close()
		mu.Lock()
		if serial != nil {
			serial.Close()
		}
		mu.Unlock()
	}()
	for ctx.Err() == nil {
		s, err := net.Dial("unix", b.Machine.SerialSocket())
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(b.redialEvery):
			}
			continue
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			s.Close()
			return
		}
		serial = s
		mu.Unlock()
		_, err = io.Copy(client, s)
		mu.Lock()
		serial = nil
		mu.Unlock()
		s.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			// The client is gone when writing to it fails.
			return
		}
	}
}
