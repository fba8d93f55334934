package nodeserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/baremetal/bootiso"
	"github.com/corral/corral/internal/ecode"
)

// machineMediaDir is the directory under the node's state directory that
// holds the boot ISOs of machines, one subdirectory per machine.
const machineMediaDir = "machine-media"

// machineMediaPath is the URL path the ISOs are served under:
// /machine-media/<machine>/<random>.iso.
const machineMediaPath = "/" + machineMediaDir + "/"

// validMachineID accepts machine uuids (and names of the same shape): a
// machine's id becomes a directory and a URL path element, so it is 1 to
// 128 letters, digits, '.', '_' or '-', not starting with a punctuation.
func validMachineID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '.' || r == '_' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// validMediaFile accepts the names of the ISOs this node makes: 32
// lower-case hex digits and ".iso".
func validMediaFile(name string) bool {
	hexPart, ok := strings.CutSuffix(name, ".iso")
	if !ok || len(hexPart) != 32 {
		return false
	}
	for _, r := range hexPart {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// MachineMediaOptions configure the boot media corral-node builds and
// serves for machines booting through virtual media.
type MachineMediaOptions struct {
	// Listen is the address of the HTTP listener the BMCs download the
	// ISOs from; "" turns virtual media boot off.
	Listen string
	// URL is the base URL the BMCs reach that listener at; by default
	// http://<listen address>, with the RPC listener's host when the
	// listen address's host is unspecified.
	URL string
	// AgentRamdisk is the directory of the agent's vmlinuz and initrd.img
	// (scripts/build-agent-ramdisk.sh).
	AgentRamdisk string
	// Loader locates isolinux and xorriso (Debian's places when zero).
	Loader bootiso.Loader
}

// machineMedia builds, keeps and serves the machines' boot ISOs.
type machineMedia struct {
	dir     string // <state dir>/machine-media
	ramdisk string
	loader  bootiso.Loader
	ln      net.Listener // nil: virtual media boot is off
	baseURL string
	log     *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // one per machine: prepare and clean up in turn
}

// openMachineMedia prepares the media directory and, when o.Listen is
// set, listens for the BMCs' downloads (serve serves them). rpcListen is
// the node's RPC address, whose host stands in for an unspecified one.
func openMachineMedia(stateDir, rpcListen string, o MachineMediaOptions, log *slog.Logger) (*machineMedia, error) {
	m := &machineMedia{dir: filepath.Join(stateDir, machineMediaDir), ramdisk: o.AgentRamdisk, loader: o.Loader,
		log: log, locks: map[string]*sync.Mutex{}}
	if o.Listen == "" {
		return m, nil
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, fmt.Errorf("machine media directory: %w", err)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("machine media: listening on %s: %w", o.Listen, err)
	}
	base, err := mediaBaseURL(o.URL, ln.Addr().(*net.TCPAddr), rpcListen)
	if err != nil {
		ln.Close()
		return nil, err
	}
	m.ln, m.baseURL = ln, base
	return m, nil
}

// mediaBaseURL is the URL BMCs download ISOs from.
func mediaBaseURL(given string, addr *net.TCPAddr, rpcListen string) (string, error) {
	if given != "" {
		u, err := url.Parse(given)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			return "", ecode.Errorf(ecode.Inval, "machine media URL %q is not an http(s) URL of a host", given)
		}
		return strings.TrimRight(given, "/"), nil
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		h, _, err := net.SplitHostPort(rpcListen)
		if err != nil || h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
			return "", ecode.Errorf(ecode.Inval, "machine media listens on every address: give the URL BMCs reach it at (--machine-media-url)")
		}
		host = h
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port)), nil
}

// enabled reports whether this node serves boot media.
func (m *machineMedia) enabled() bool { return m != nil && m.ln != nil }

// close stops listening (for a daemon that fails to start).
func (m *machineMedia) close() {
	if m.enabled() {
		m.ln.Close()
	}
}

// serve serves the ISOs until ctx ends.
func (m *machineMedia) serve(ctx context.Context) error {
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	m.log.Info("serving machine boot media", "listen", m.ln.Addr().String(), "url", m.baseURL)
	err := srv.Serve(m.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeHTTP answers GET and HEAD of /machine-media/<machine>/<name>.iso
// with the file, anything else with 404 or 405. Only names this node
// makes are served: nothing else of the state directory can be reached.
func (m *machineMedia) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, machineMediaPath)
	machine, name, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !validMachineID(machine) || !validMediaFile(name) {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(filepath.Join(m.dir, machine, name))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// lockMachine serializes the media changes of one machine.
func (m *machineMedia) lockMachine(machine string) func() {
	m.mu.Lock()
	l, ok := m.locks[machine]
	if !ok {
		l = &sync.Mutex{}
		m.locks[machine] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// build makes a new ISO of the agent ramdisk for machine with cmdline and
// returns its path and URL. Older ISOs of the machine stay until
// removeExcept: the BMC may still be reading one.
func (m *machineMedia) build(ctx context.Context, machine, cmdline string) (path, mediaURL string, err error) {
	if !m.enabled() {
		return "", "", ecode.Errorf(ecode.Environ, "this node serves no machine boot media: start corral-node with --machine-media-listen to boot machines through virtual media")
	}
	if m.ramdisk == "" {
		return "", "", ecode.Errorf(ecode.Environ, "this node has no agent ramdisk: start corral-node with --agent-ramdisk DIR (made by scripts/build-agent-ramdisk.sh)")
	}
	dir := filepath.Join(m.dir, machine)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("machine media directory: %w", err)
	}
	var rnd [16]byte
	rand.Read(rnd[:])
	name := hex.EncodeToString(rnd[:]) + ".iso"
	path = filepath.Join(dir, name)
	if err := m.loader.Build(ctx, m.ramdisk, path, cmdline); err != nil {
		return "", "", err
	}
	return path, m.baseURL + machineMediaPath + machine + "/" + name, nil
}

// removeExcept deletes the machine's ISOs other than keep (a path; "" to
// delete them all, and the machine's directory with them).
func (m *machineMedia) removeExcept(machine, keep string) error {
	dir := filepath.Join(m.dir, machine)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("machine media of %s: %w", machine, err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == keep {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("machine media of %s: %w", machine, err)
		}
	}
	if keep == "" {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("machine media of %s: %w", machine, err)
		}
	}
	return nil
}
