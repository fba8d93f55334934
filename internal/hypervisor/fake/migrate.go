package fake

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// The fake migrates for real, between two fake hypervisors (two node
// daemons): the destination listens with TLS, the source connects with its
// certificate, checks the destination's, and sends the instance. The
// "memory copy" takes the instance's memory divided by migration_bandwidth,
// in slices that a cancel interrupts, so jobs see progress and can cancel.

var _ hypervisor.Migrator = (*Hypervisor)(nil)

// migrations are the transfers of one fake hypervisor, in memory: a
// restarted daemon has none (like a qemu that died).
type migrations struct {
	mu        sync.Mutex
	listeners map[string]net.Listener // destination side, by instance
	outgoing  map[string]*outgoing    // source side, by instance
}

type outgoing struct {
	status hypervisor.MigrationStatus
	cancel context.CancelFunc
	start  time.Time
}

// transferSlice is how much "memory" moves between two cancel checks.
const transferSlice = 8 // MiB

func (m *migrations) init() {
	if m.listeners == nil {
		m.listeners = map[string]net.Listener{}
		m.outgoing = map[string]*outgoing{}
	}
}

// migrationHello is what the source sends.
type migrationHello struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
	Live bool   `json:"live"`
}

func tlsPair(t hypervisor.MigrationTLS) (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.X509KeyPair(t.CertPEM, t.KeyPEM)
	if err != nil {
		return cert, nil, ecode.Errorf(ecode.Inval, "migration TLS credentials: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(t.CAPEM) {
		return cert, nil, ecode.Errorf(ecode.Inval, "migration TLS credentials: no CA certificate")
	}
	return cert, pool, nil
}

// AcceptMigration listens for the source of an instance started Incoming.
func (h *Hypervisor) AcceptMigration(ctx context.Context, name string, in hypervisor.MigrationIncoming) error {
	info, err := h.Info(ctx, name)
	if err != nil {
		return err
	}
	if info == nil {
		return hypervisor.NotRunning(name)
	}
	cert, pool, err := tlsPair(in.TLS)
	if err != nil {
		return err
	}
	h.mig.mu.Lock()
	defer h.mig.mu.Unlock()
	h.mig.init()
	if _, ok := h.mig.listeners[name]; ok {
		return nil
	}
	addr := net.JoinHostPort(in.Address, strconv.Itoa(in.Port))
	ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	if err != nil {
		return ecode.Errorf(ecode.Environ, "migration of %s: listening on %s: %w", name, addr, err)
	}
	h.mig.listeners[name] = ln
	go h.receive(ln, name, info.UUID)
	return nil
}

func (h *Hypervisor) receive(ln net.Listener, name, uuid string) {
	defer func() {
		h.mig.mu.Lock()
		if h.mig.listeners[name] == ln {
			delete(h.mig.listeners, name)
		}
		h.mig.mu.Unlock()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		done := h.receiveOne(conn, name, uuid)
		conn.Close()
		if done {
			return
		}
	}
}

// receiveOne takes one connection; true once the instance has arrived.
func (h *Hypervisor) receiveOne(conn net.Conn, name, uuid string) bool {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Minute))
	r := bufio.NewReader(conn)
	var hello migrationHello
	line, err := r.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &hello) != nil || hello.Name != name || hello.UUID != uuid {
		return false
	}
	// The memory slices, then "done".
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false // the source gave up: keep waiting, as qemu would not
		}
		if line == "done\n" {
			break
		}
	}
	state := hypervisor.StateRunning
	if !hello.Live {
		state = hypervisor.StatePaused
	}
	if err := h.SetState(name, state); err != nil {
		return false
	}
	_, _ = conn.Write([]byte("ok\n"))
	return true
}

// StartMigration sends the instance to the destination.
func (h *Hypervisor) StartMigration(ctx context.Context, name string, out hypervisor.MigrationOutgoing) error {
	info, err := h.Info(ctx, name)
	if err != nil {
		return err
	}
	if info == nil {
		return hypervisor.NotRunning(name)
	}
	cert, pool, err := tlsPair(out.TLS)
	if err != nil {
		return err
	}
	h.mig.mu.Lock()
	defer h.mig.mu.Unlock()
	h.mig.init()
	if o, ok := h.mig.outgoing[name]; ok {
		switch o.status.Status {
		case hypervisor.MigrationCompleted:
			return ecode.Errorf(ecode.State, "instance %s has already been migrated away", name)
		case hypervisor.MigrationSetup, hypervisor.MigrationActive:
			return nil
		}
	}
	if !out.Live {
		if err := h.SetState(name, hypervisor.StatePaused); err != nil {
			return err
		}
	}
	tctx, cancel := context.WithCancel(context.Background())
	o := &outgoing{status: hypervisor.MigrationStatus{Status: hypervisor.MigrationSetup, TotalMiB: info.MemoryMiB}, cancel: cancel, start: time.Now()}
	h.mig.outgoing[name] = o
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: out.TLSHostname, MinVersion: tls.VersionTLS12}
	addr := net.JoinHostPort(out.Address, strconv.Itoa(out.Port))
	go h.send(tctx, o, name, info, out, addr, cfg)
	return nil
}

func (h *Hypervisor) send(ctx context.Context, o *outgoing, name string, info *hypervisor.RunningInstance, out hypervisor.MigrationOutgoing, addr string, cfg *tls.Config) {
	err := h.transfer(ctx, o, info, out, addr, cfg)
	h.mig.mu.Lock()
	defer h.mig.mu.Unlock()
	o.status.TotalMS = time.Since(o.start).Milliseconds()
	switch {
	case err == nil:
		o.status.Status = hypervisor.MigrationCompleted
		_ = h.SetState(name, hypervisor.StatePaused) // qemu's postmigrate
		return
	case ctx.Err() != nil:
		o.status.Status = hypervisor.MigrationCancelled
	default:
		o.status.Status, o.status.Error = hypervisor.MigrationFailed, err.Error()
	}
	_ = h.SetState(name, hypervisor.StateRunning)
}

func (h *Hypervisor) transfer(ctx context.Context, o *outgoing, info *hypervisor.RunningInstance, out hypervisor.MigrationOutgoing, addr string, cfg *tls.Config) error {
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	hello, _ := json.Marshal(migrationHello{Name: info.Name, UUID: info.UUID, Live: out.Live})
	if _, err := conn.Write(append(hello, '\n')); err != nil {
		return err
	}
	h.setStatus(o, hypervisor.MigrationActive, 0)
	bw := max(out.BandwidthMiB, 1)
	slice := time.Duration(float64(time.Second) * transferSlice / float64(bw))
	for sent := int64(0); sent < info.MemoryMiB; sent += transferSlice {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(slice):
		}
		if _, err := conn.Write([]byte("page\n")); err != nil {
			return err
		}
		h.setStatus(o, hypervisor.MigrationActive, min(sent+transferSlice, info.MemoryMiB))
	}
	pause := time.Now()
	if _, err := conn.Write([]byte("done\n")); err != nil {
		return err
	}
	reply, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || reply != "ok\n" {
		return fmt.Errorf("the destination did not take the instance: %w", err)
	}
	h.mig.mu.Lock()
	o.status.DowntimeMS = max(time.Since(pause).Milliseconds(), 1)
	h.mig.mu.Unlock()
	return nil
}

func (h *Hypervisor) setStatus(o *outgoing, status string, sent int64) {
	h.mig.mu.Lock()
	defer h.mig.mu.Unlock()
	o.status.Status = status
	o.status.TransferredMiB = sent
	o.status.RemainingMiB = o.status.TotalMiB - sent
	o.status.DirtySyncs = 1
	o.status.TotalMS = time.Since(o.start).Milliseconds()
}

// MigrationStatus reports the source side's transfer.
func (h *Hypervisor) MigrationStatus(ctx context.Context, name string) (hypervisor.MigrationStatus, error) {
	info, err := h.Info(ctx, name)
	if err != nil {
		return hypervisor.MigrationStatus{}, err
	}
	if info == nil {
		return hypervisor.MigrationStatus{}, hypervisor.NotRunning(name)
	}
	h.mig.mu.Lock()
	defer h.mig.mu.Unlock()
	h.mig.init()
	if o, ok := h.mig.outgoing[name]; ok {
		return o.status, nil
	}
	return hypervisor.MigrationStatus{Status: hypervisor.MigrationNone}, nil
}

// StartPostcopy is refused: the fake has no pages to fetch later.
func (h *Hypervisor) StartPostcopy(ctx context.Context, name string) error {
	return ecode.Errorf(ecode.Inval, "the fake hypervisor has no post-copy")
}

// CancelMigration stops the transfer; the source runs on.
func (h *Hypervisor) CancelMigration(ctx context.Context, name string) error {
	h.mig.mu.Lock()
	h.mig.init()
	o, ok := h.mig.outgoing[name]
	completed := ok && o.status.Status == hypervisor.MigrationCompleted
	h.mig.mu.Unlock()
	if !ok {
		return nil
	}
	if completed {
		return ecode.Errorf(ecode.State, "the migration of %s has completed: the destination runs it", name)
	}
	o.cancel()
	for {
		h.mig.mu.Lock()
		done := o.status.Finished()
		h.mig.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// FinishMigration runs a destination that arrived paused.
func (h *Hypervisor) FinishMigration(ctx context.Context, name string) error {
	info, err := h.Info(ctx, name)
	if err != nil {
		return err
	}
	if info == nil {
		return hypervisor.NotRunning(name)
	}
	h.mig.mu.Lock()
	_, waiting := h.mig.listeners[name]
	h.mig.mu.Unlock()
	if waiting {
		return ecode.Errorf(ecode.State, "instance %s has not received its state yet", name)
	}
	return h.SetState(name, hypervisor.StateRunning)
}

// forget drops what the fake knows of an instance's migrations (it stopped).
func (h *Hypervisor) forgetMigration(name string) {
	h.mig.mu.Lock()
	defer h.mig.mu.Unlock()
	h.mig.init()
	if ln, ok := h.mig.listeners[name]; ok {
		ln.Close()
		delete(h.mig.listeners, name)
	}
	if o, ok := h.mig.outgoing[name]; ok {
		o.cancel()
		delete(h.mig.outgoing, name)
	}
}
