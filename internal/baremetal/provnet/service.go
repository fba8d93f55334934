package provnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Options are what a Service needs besides its Config.
type Options struct {
	// StateDir holds dnsmasq's configuration, pid, leases and log, the
	// DHCP hosts directory and the prepared boots. dnsmasq drops its
	// privileges and reads the hosts directory later, so the path must be
	// searchable by others.
	StateDir string
	// RamdiskDir holds the agent ramdisk's vmlinuz and initrd.img.
	RamdiskDir string
	// Logger receives forwarder and boot server errors (default: none).
	Logger *log.Logger
}

// Service runs the provisioning networks of one corral-node.
type Service struct {
	cfg        *Config
	stateDir   string
	ramdiskDir string
	logger     *log.Logger

	mu        sync.Mutex
	listeners []net.Listener
	servers   []*http.Server
	// piped are the forwarder's open connections, closed by Close.
	piped map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New checks the options; nothing runs until Start.
func New(cfg *Config, o Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.StateDir == "" || !filepath.IsAbs(o.StateDir) {
		return nil, ecode.Errorf(ecode.Inval, "provisioning networks: state directory %q is not an absolute path", o.StateDir)
	}
	if len(cfg.BootNetworks()) > 0 && (o.RamdiskDir == "" || !filepath.IsAbs(o.RamdiskDir)) {
		return nil, ecode.Errorf(ecode.Inval, "provisioning networks: ramdisk directory %q is not an absolute path", o.RamdiskDir)
	}
	logger := o.Logger
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	return &Service{cfg: cfg, stateDir: o.StateDir, ramdiskDir: o.RamdiskDir, logger: logger,
		piped: map[net.Conn]struct{}{}}, nil
}

// Config is the service's (checked) configuration.
func (s *Service) Config() *Config { return s.cfg }

// Start ensures the namespace and bridges, then on each booting network
// starts dnsmasq (or keeps the one running with the same configuration),
// the boot HTTP server and the API forwarder. Close stops what Start
// started.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.piped == nil {
		s.piped = map[net.Conn]struct{}{}
	}
	s.mu.Unlock()
	if err := s.makeDirs(); err != nil {
		return err
	}
	if err := s.cfg.Ensure(ctx); err != nil {
		return err
	}
	for _, n := range s.cfg.BootNetworks() {
		if err := s.startDHCP(ctx, n); err != nil {
			s.Close()
			return err
		}
		if err := s.serve(n); err != nil {
			s.Close()
			return err
		}
	}
	return nil
}

func (s *Service) makeDirs() error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{s.stateDir, 0o755}, {s.dnsmasqDir(), 0o755}, {s.DHCPHostsDir(), 0o755}, {s.bootDir(), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return ecode.ExecErrorf("provisioning networks state: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return ecode.ExecErrorf("provisioning networks state: %w", err)
		}
	}
	// dnsmasq runs as nobody after start-up and must reach its hosts
	// directory: every directory above it must be searchable.
	for dir := filepath.Dir(s.stateDir); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return ecode.ExecErrorf("provisioning networks state: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return ecode.Errorf(ecode.Environ, "directory %s above the state directory is not searchable by others; dnsmasq could not read its DHCP hosts", dir)
		}
		if dir == "/" {
			return nil
		}
	}
}

// serve starts the boot HTTP server, the API forwarder and the other
// forwards on the network's gateway address, listening inside the
// namespace.
func (s *Service) serve(n *Network) error {
	httpL, err := s.listen(netip.AddrPortFrom(n.Gateway(), uint16(s.cfg.HTTPPort)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.bootHandler(n), ReadHeaderTimeout: 10 * time.Second, ErrorLog: s.logger}
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(httpL); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Printf("boot server of %s: %v", n.Name, err)
		}
	}()
	fwds := s.cfg.Forwards
	if s.cfg.APITarget != "" {
		fwds = append([]Forward{{Port: s.cfg.APIPort, Target: s.cfg.APITarget}}, fwds...)
	}
	for _, f := range fwds {
		l, err := s.listen(netip.AddrPortFrom(n.Gateway(), uint16(f.Port)))
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.listeners = append(s.listeners, l)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.forward(l, f.Target)
		}()
	}
	return nil
}

// listen opens a TCP listener inside the namespace.
func (s *Service) listen(addr netip.AddrPort) (net.Listener, error) {
	var l net.Listener
	err := inNetns(NetnsPath(s.cfg.Netns), func() error {
		var err error
		l, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, ecode.ExecErrorf("listening on %s in %s: %w", addr, s.cfg.Netns, err)
	}
	return l, nil
}

// forward copies every connection accepted in the namespace to target,
// dialled from the host's namespace, until the listener closes.
func (s *Service) forward(l net.Listener, target string) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.logger.Printf("API forwarder on %s: %v", l.Addr(), err)
			}
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			s.pipe(c, target)
		}()
	}
}

// track keeps c to be closed by Close, until the returned func says it
// is done; false when the service is closing.
func (s *Service) track(c net.Conn) (untrack func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.piped == nil {
		return nil, false
	}
	s.piped[c] = struct{}{}
	return func() {
		s.mu.Lock()
		delete(s.piped, c)
		s.mu.Unlock()
		c.Close()
	}, true
}

func (s *Service) pipe(in net.Conn, target string) {
	untrackIn, ok := s.track(in)
	if !ok {
		in.Close()
		return
	}
	defer untrackIn()
	out, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		s.logger.Printf("API forwarder: %s to %s: %v", in.RemoteAddr(), target, err)
		return
	}
	untrackOut, ok := s.track(out)
	if !ok {
		out.Close()
		return
	}
	defer untrackOut()
	done := make(chan struct{}, 2)
	half := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go half(out, in)
	go half(in, out)
	<-done
	<-done
}

// DialContext opens a connection from inside the namespace, as a machine
// on one of its networks would: the conductor's calls to an agent's
// callback URL. It fits http.Transport's DialContext.
func (s *Service) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(NetnsPath(s.cfg.Netns), func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dialling %s in network namespace %s: %w", addr, s.cfg.Netns, err)
	}
	return c, nil
}

// Attach moves a machine's port to the network's bridge (Config.Attach).
func (s *Service) Attach(ctx context.Context, portID, network string) error {
	return s.cfg.Attach(ctx, portID, network)
}

// Close stops the boot servers, the forwarders and every dnsmasq. The
// namespace, its bridges and the prepared boots stay.
func (s *Service) Close() error {
	s.mu.Lock()
	servers, listeners, piped := s.servers, s.listeners, s.piped
	s.servers, s.listeners, s.piped = nil, nil, nil
	for c := range piped {
		c.Close()
	}
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range s.cfg.BootNetworks() {
		if err := s.stopDHCP(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Destroy closes the service and deletes the namespace with its bridges
// and the ports in it.
func (s *Service) Destroy(ctx context.Context) error {
	return errors.Join(s.Close(), s.cfg.DeleteNetns(ctx))
}
