package nodeserver

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/impexp"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/osapi"
	"github.com/corral/corral/internal/pki"
)

const (
	// transferKeep is how long a finished transfer's status stays without
	// a cleanup call.
	transferKeep = time.Hour
	// recentLines is how much of an OS script's output a status carries
	// (Ganeti's status file keeps 20 lines).
	recentLines = 20
	mib         = 1 << 20
	// maxConnectRetries bounds what a caller may ask for.
	maxConnectRetries = 1000
)

var (
	componentRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

	errScriptEnded = errors.New("the import script exited before reading the whole stream")
	errAborted     = errors.New("aborted")
)

// impexpRoutes registers the transfer certificate, transfer and export
// directory calls.
func (s *Server) impexpRoutes() {
	if s.opts.ExportDir == "" {
		s.opts.ExportDir = filepath.Join(s.opts.StateDir, "export")
	}
	s.certs = newCertStore(filepath.Join(s.opts.StateDir, "crypto"), s.name, pki.NewTransferCert, s.log)
	s.xfers = newTransfers(s.log)
	s.exports = exportDir{dir: s.opts.ExportDir, node: s.name}

	handle(s, nodeapi.X509CertCreate, s.x509CertCreate)
	handle(s, nodeapi.X509CertRemove, s.x509CertRemove)
	handle(s, nodeapi.ImportStart, s.importStart)
	handle(s, nodeapi.ExportStart, s.exportStart)
	handle(s, nodeapi.ImpExpStatus, s.impexpStatus)
	handle(s, nodeapi.ImpExpAbort, s.impexpAbort)
	handle(s, nodeapi.ImpExpCleanup, s.impexpCleanup)
	handle(s, nodeapi.ExportList, s.exportList)
	handle(s, nodeapi.ExportInfo, s.exportInfo)
	handle(s, nodeapi.ExportRemove, s.exportRemove)
	handle(s, nodeapi.ExportFinalize, s.exportFinalize)
}

// dataSink is where an import writes what it receives.
type dataSink struct {
	w io.Writer
	// finish runs after the stream ended (recvErr nil: complete): it makes
	// the data durable or waits for the script, and reports their failure.
	finish func(recvErr error) error
	// recent, when set, gives the last output lines of an OS script.
	recent func() []string
	// discard, when set, removes what a failed import left behind.
	discard func()
}

// dataSource is where an export reads what it sends.
type dataSource struct {
	r      io.Reader
	finish func(sendErr error) error
	recent func() []string
}

type (
	sinkOpener   func(ctx context.Context) (*dataSink, error)
	sourceOpener func(ctx context.Context) (*dataSource, error)
)

// transfer is one running or finished import or export.
type transfer struct {
	name      string
	component string
	port      int
	started   time.Time
	cancel    context.CancelFunc
	done      chan struct{} // closed when the goroutine has finished
	discard   func()
	recent    func() []string

	// Guarded by transfers.mu.
	prog     impexp.Progress
	bytes    int64
	finished bool
	aborted  bool
	ended    time.Time
	err      error
}

// transfers is the node's registry of imports and exports, in memory: a
// restarted daemon has lost its transfers, and the master sees them as
// unknown (failed).
type transfers struct {
	log  *slog.Logger
	now  func() time.Time
	keep time.Duration

	mu sync.Mutex
	m  map[string]*transfer
}

func newTransfers(log *slog.Logger) *transfers {
	return &transfers{log: log, now: time.Now, keep: transferKeep, m: map[string]*transfer{}}
}

func (ts *transfers) newTransfer(kind, component string) (*transfer, context.Context, error) {
	if !componentRE.MatchString(component) {
		return nil, nil, ecode.Errorf(ecode.Inval, "invalid transfer component %q", component)
	}
	var rnd [3]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, nil, err
	}
	now := ts.now()
	ctx, cancel := context.WithCancel(context.Background())
	t := &transfer{
		name:      fmt.Sprintf("%s-%s-%d-%s", kind, component, now.Unix(), hex.EncodeToString(rnd[:])),
		component: component, started: now, cancel: cancel, done: make(chan struct{}),
	}
	return t, ctx, nil
}

func (ts *transfers) register(t *transfer) {
	ts.expire()
	ts.mu.Lock()
	ts.m[t.name] = t
	ts.mu.Unlock()
}

func (ts *transfers) progressFunc(t *transfer) func(impexp.Progress) {
	return func(p impexp.Progress) {
		ts.mu.Lock()
		t.prog = p
		ts.mu.Unlock()
	}
}

// startImport binds addr (port 0 for any) and receives into the sink in
// the background. The sink is opened only once the listener exists, so a
// bind failure never starts an import script.
func (ts *transfers) startImport(cfg impexp.Config, addr, component string, open sinkOpener) (string, int, error) {
	t, ctx, err := ts.newTransfer("import", component)
	if err != nil {
		return "", 0, err
	}
	cfg.Progress = ts.progressFunc(t)
	l, err := impexp.Listen(cfg, addr)
	if err != nil {
		t.cancel()
		return "", 0, fmt.Errorf("import %s: %w", t.name, err)
	}
	sink, err := open(ctx)
	if err != nil {
		l.Close()
		t.cancel()
		return "", 0, err
	}
	t.port, t.discard, t.recent = l.Port(), sink.discard, sink.recent
	ts.register(t)
	ts.log.Info("import started", "transfer", t.name, "component", component, "port", t.port)
	go func() {
		defer close(t.done)
		n, err := l.Receive(ctx, sink.w)
		if err != nil {
			t.cancel() // stops an import script before it sees a clean end
		}
		ferr := sink.finish(err)
		if err == nil {
			err = ferr
		}
		ts.finish(t, n, err)
	}()
	return t.name, t.port, nil
}

// startExport opens the source and sends it to addr in the background.
func (ts *transfers) startExport(cfg impexp.Config, addr, component string, open sourceOpener) (string, error) {
	t, ctx, err := ts.newTransfer("export", component)
	if err != nil {
		return "", err
	}
	cfg.Progress = ts.progressFunc(t)
	src, err := open(ctx)
	if err != nil {
		t.cancel()
		return "", err
	}
	t.recent = src.recent
	ts.register(t)
	ts.log.Info("export started", "transfer", t.name, "component", component, "peer", addr)
	go func() {
		defer close(t.done)
		n, err := impexp.Send(ctx, cfg, addr, src.r)
		if err != nil {
			t.cancel()
		}
		ferr := src.finish(err)
		if err == nil {
			err = ferr
		}
		ts.finish(t, n, err)
	}()
	return t.name, nil
}

func (ts *transfers) finish(t *transfer, n int64, err error) {
	ts.mu.Lock()
	if t.aborted && err != nil {
		err = fmt.Errorf("%w: %v", errAborted, err)
	}
	t.finished, t.ended, t.err, t.bytes = true, ts.now(), err, n
	ts.mu.Unlock()
	d := t.ended.Sub(t.started).Round(time.Millisecond)
	if err != nil {
		ts.log.Info("transfer failed", "transfer", t.name, "component", t.component, "bytes", n, "duration", d, "err", err)
		return
	}
	ts.log.Info("transfer finished", "transfer", t.name, "component", t.component, "bytes", n, "duration", d)
}

// status reports one transfer; an unknown name has Known false.
func (ts *transfers) status(name string) nodeapi.TransferStatus {
	ts.expire()
	ts.mu.Lock()
	t, ok := ts.m[name]
	if !ok {
		ts.mu.Unlock()
		return nodeapi.TransferStatus{Name: name}
	}
	st := nodeapi.TransferStatus{
		Name: name, Known: true, Kind: transferKind(name), Age: ts.now().Sub(t.started).Seconds(),
		ListenPort: t.port, Connected: t.prog.Connected,
		Bytes: max(t.prog.Bytes, t.bytes), Throughput: t.prog.Throughput / mib,
		ETA: t.prog.ETA.Seconds(), Percent: t.prog.Percent, Done: t.finished,
	}
	if t.finished {
		st.OK = t.err == nil
		st.ETA = 0
		if t.err != nil {
			st.Error = t.err.Error()
		}
	}
	recent := t.recent
	ts.mu.Unlock()
	st.MiB = float64(st.Bytes) / mib
	if recent != nil {
		st.Recent = recent()
	}
	return st
}

// transferKind is "import" or "export", from the transfer's name.
func transferKind(name string) string {
	kind, _, _ := strings.Cut(name, "-")
	return kind
}

// names lists the known transfers, sorted.
func (ts *transfers) names() []string {
	ts.expire()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]string, 0, len(ts.m))
	for n := range ts.m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// abort cancels a running transfer; it reports whether the name is known.
func (ts *transfers) abort(name string) bool {
	ts.mu.Lock()
	t, ok := ts.m[name]
	running := ok && !t.finished
	if running {
		t.aborted = true
	}
	ts.mu.Unlock()
	if running {
		t.cancel()
		ts.log.Info("transfer aborted", "transfer", name)
	}
	return ok
}

// cleanup aborts a running transfer, waits for it to end and forgets it; a
// failed import into the export directory loses its partial file.
func (ts *transfers) cleanup(name string) {
	if !ts.abort(name) {
		return
	}
	ts.mu.Lock()
	t := ts.m[name]
	ts.mu.Unlock()
	if t == nil {
		return // a concurrent cleanup was quicker
	}
	<-t.done
	ts.mu.Lock()
	failed := t.err != nil
	delete(ts.m, name)
	ts.mu.Unlock()
	if failed && t.discard != nil {
		t.discard()
	}
}

// expire forgets transfers finished longer ago than keep.
func (ts *transfers) expire() {
	now := ts.now()
	var gone []*transfer
	ts.mu.Lock()
	for name, t := range ts.m {
		if t.finished && now.Sub(t.ended) > ts.keep {
			delete(ts.m, name)
			gone = append(gone, t)
		}
	}
	ts.mu.Unlock()
	for _, t := range gone {
		if t.err != nil && t.discard != nil {
			t.discard()
		}
	}
}

// fileSink writes into path; create makes (and truncates) a file in the
// export directory, otherwise the file must exist (a disk, made by
// blockdev_create) and keeps its size.
func fileSink(path string, create bool) sinkOpener {
	return func(ctx context.Context) (*dataSink, error) {
		flags := os.O_WRONLY
		if create {
			flags |= os.O_CREATE | os.O_TRUNC
		}
		f, err := os.OpenFile(path, flags, exportFileMode)
		if err != nil {
			return nil, ecode.Errorf(ecode.Environ, "opening %s for the import: %v", path, err)
		}
		// The disk writes run while the stream does; Receive syncs the
		// writer before it acknowledges the stream, so the exporter's
		// success means the data is on disk.
		wb, err := impexp.NewWritebackFile(f)
		if err != nil {
			f.Close()
			return nil, ecode.Errorf(ecode.Environ, "opening %s for the import: %w", path, err)
		}
		sink := &dataSink{w: wb, finish: func(recvErr error) error {
			wb.Abandon() // after Receive's Sync: nothing left to stop
			if err := f.Close(); err != nil && recvErr == nil {
				return fmt.Errorf("closing %s: %w", path, err)
			}
			return nil
		}}
		if create {
			sink.discard = func() { os.Remove(path) }
		}
		return sink, nil
	}
}

// fileSource reads path from its start.
func fileSource(path string) sourceOpener {
	return func(ctx context.Context) (*dataSource, error) {
		f, err := os.Open(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil, ecode.Errorf(ecode.NoEnt, "%s does not exist", path)
			}
			return nil, ecode.Errorf(ecode.Environ, "opening %s for the export: %v", path, err)
		}
		// A disk is read once, front to back: a larger read-ahead keeps
		// the stream from waiting on the disk (a hint; errors ignored).
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_SEQUENTIAL)
		return &dataSource{r: f, finish: func(error) error { return f.Close() }}, nil
	}
}

// scriptOutput remembers an OS script's log once the script has run, for
// the status's recent lines.
type scriptOutput struct {
	mu  sync.Mutex
	log string
}

func (o *scriptOutput) set(log string) {
	o.mu.Lock()
	o.log = log
	o.mu.Unlock()
}

func (o *scriptOutput) lines() []string {
	o.mu.Lock()
	log := o.log
	o.mu.Unlock()
	if log == "" {
		return nil
	}
	return tailLines(log, recentLines)
}

// tailLines returns up to n last lines of a file, reading at most its last
// 16 KiB.
func tailLines(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-16<<10, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	text := strings.TrimRight(string(buf), "\n")
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first is cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// transferConfig checks the options both ends agreed on and loads this
// end's key. Errors name what is wrong, never key material.
func (s *Server) transferConfig(o nodeapi.ImpExpOptions) (impexp.Config, error) {
	cert, err := s.certs.load(o.KeyName)
	if err != nil {
		return impexp.Config{}, err
	}
	peer, err := parsePeerCert(o.PeerCertPEM)
	if err != nil {
		return impexp.Config{}, err
	}
	if !pki.ValidMagic(o.Magic) {
		return impexp.Config{}, ecode.Errorf(ecode.Inval, "invalid transfer magic: want 5 to 100 of A-Z a-z 0-9 - _ .")
	}
	comp, err := impexp.ParseCompression(o.Compress)
	if err != nil {
		return impexp.Config{}, err
	}
	if o.ConnectTimeout < 0 || o.ConnectTimeout > 24*3600 {
		return impexp.Config{}, ecode.Errorf(ecode.Inval, "invalid connect timeout %d s", o.ConnectTimeout)
	}
	if o.ConnectRetries < 0 || o.ConnectRetries > maxConnectRetries {
		return impexp.Config{}, ecode.Errorf(ecode.Inval, "invalid connect retries %d (0 to %d)", o.ConnectRetries, maxConnectRetries)
	}
	// The peer's certificate says which stream it speaks: Corral's own
	// between Corral nodes, Ganeti's socat stream with a Ganeti node.
	return impexp.Config{Cert: cert, Peer: peer, Magic: o.Magic, Compress: comp, Stream: impexp.StreamFor(peer),
		ConnectTimeout: time.Duration(o.ConnectTimeout) * time.Second, ConnectRetries: o.ConnectRetries, Logger: s.log}, nil
}

// parsePeerCert accepts exactly one certificate.
func parsePeerCert(text string) (*x509.Certificate, error) {
	certs, err := pki.ParseCertificatesPEM([]byte(text))
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "the peer certificate does not parse as a PEM certificate")
	}
	if len(certs) != 1 {
		return nil, ecode.Errorf(ecode.Inval, "the peer certificate must be exactly one certificate, got %d", len(certs))
	}
	return certs[0], nil
}

// diskImage is the path of the instance disk an IODisk transfer uses.
func (s *Server) diskImage(x nodeapi.ImpExpIO) (string, error) {
	in := x.Instance
	if x.Disk < 0 || x.Disk >= len(in.Disks) {
		return "", ecode.Errorf(ecode.Inval, "instance %s has no disk %d", in.Name, x.Disk)
	}
	if err := refuseRBDTransfer(in); err != nil {
		return "", err
	}
	b, err := s.backend(in.DiskTemplate, in.SharedFileDir)
	if err != nil {
		return "", err
	}
	p := b.Path(in.UUID, diskOf(in.DiskTemplate, in.Disks[x.Disk]))
	if p == "" {
		return "", ecode.Errorf(ecode.Inval, "disk %d of instance %s has no image on node %s", x.Disk, in.Name, s.name)
	}
	return p, nil
}

// exportDiskImage is the file an IODisk export reads: the disk, or the
// copy of it the transfer names.
func (s *Server) exportDiskImage(x nodeapi.ImpExpIO) (string, error) {
	p, err := s.diskImage(x)
	if err != nil || x.Snapshot == "" {
		return p, err
	}
	return s.snapshotImage(x)
}

// osTarget finds the OS definition and its view of the instance for an
// IOScript transfer, as os_create does.
func (s *Server) osTarget(x nodeapi.ImpExpIO) (*osapi.OS, osapi.Instance, error) {
	if err := refuseRBDTransfer(x.Instance); err != nil {
		return nil, osapi.Instance{}, err
	}
	o, err := s.findOS(x.Instance, true)
	if err != nil {
		return nil, osapi.Instance{}, err
	}
	inst, err := s.osInstance(x.Instance, nil)
	if err != nil {
		return nil, osapi.Instance{}, err
	}
	inst.DebugLevel = x.DebugLevel
	return o, inst, nil
}

func (s *Server) importStart(ctx context.Context, a nodeapi.ImportStartArgs) (any, error) {
	cfg, err := s.transferConfig(a.Options)
	if err != nil {
		return nil, err
	}
	if a.IO.Snapshot != "" {
		return nil, ecode.Errorf(ecode.Inval, "an import cannot write into a disk snapshot")
	}
	var open sinkOpener
	switch a.IO.Kind {
	case nodeapi.IODisk:
		p, err := s.diskImage(a.IO)
		if err != nil {
			return nil, err
		}
		// The disk's size is known exactly: a short or long stream fails.
		cfg.Size = a.IO.SizeMiB * mib
		open = fileSink(p, false)
	case nodeapi.IOScript:
		o, inst, err := s.osTarget(a.IO)
		if err != nil {
			return nil, err
		}
		open = s.scriptSink(o, inst, a.IO.Disk)
	case nodeapi.IOFile:
		p, err := s.exports.importPath(a.IO.ExportName, a.IO.FileName)
		if err != nil {
			return nil, err
		}
		open = fileSink(p, true)
	default:
		return nil, ecode.Errorf(ecode.Inval, "unknown import kind %q", a.IO.Kind)
	}
	host, _, err := net.SplitHostPort(s.opts.Listen)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "node listen address %q: %v", s.opts.Listen, err)
	}
	name, port, err := s.xfers.startImport(cfg, net.JoinHostPort(host, "0"), a.Component, open)
	if err != nil {
		return nil, err
	}
	return nodeapi.ImportStartReply{Name: name, Host: host, Port: port}, nil
}

func (s *Server) exportStart(ctx context.Context, a nodeapi.ExportStartArgs) (any, error) {
	if a.Host == "" || a.Port < 1 || a.Port > 65535 {
		return nil, ecode.Errorf(ecode.Inval, "invalid export destination %q port %d", a.Host, a.Port)
	}
	cfg, err := s.transferConfig(a.Options)
	if err != nil {
		return nil, err
	}
	var open sourceOpener
	switch a.IO.Kind {
	case nodeapi.IODisk:
		p, err := s.exportDiskImage(a.IO)
		if err != nil {
			return nil, err
		}
		cfg.Size = a.IO.SizeMiB * mib
		open = fileSource(p)
	case nodeapi.IOScript:
		o, inst, err := s.osTarget(a.IO)
		if err != nil {
			return nil, err
		}
		if a.IO.Snapshot != "" {
			if a.IO.Disk < 0 || a.IO.Disk >= len(inst.Disks) {
				return nil, ecode.Errorf(ecode.Inval, "instance %s has no disk %d", inst.Name, a.IO.Disk)
			}
			// The export script reads the copy as the disk.
			if inst.Disks[a.IO.Disk].Path, err = s.snapshotImage(a.IO); err != nil {
				return nil, err
			}
		}
		open = s.scriptSource(o, inst, a.IO.Disk)
	case nodeapi.IOFile:
		p, err := s.exports.exportPath(a.IO.ExportName, a.IO.FileName)
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(p); err == nil {
			cfg.Size = st.Size() // exact: progress and ETA are right
		}
		open = fileSource(p)
	default:
		return nil, ecode.Errorf(ecode.Inval, "unknown export kind %q", a.IO.Kind)
	}
	name, err := s.xfers.startExport(cfg, net.JoinHostPort(a.Host, strconv.Itoa(a.Port)), a.Component, open)
	if err != nil {
		return nil, err
	}
	return nodeapi.ExportStartReply{Name: name}, nil
}

func (s *Server) impexpStatus(ctx context.Context, a nodeapi.ImpExpNames) (any, error) {
	out := nodeapi.ImpExpStatusReply{Status: []nodeapi.TransferStatus{}}
	names := a.Names
	if len(names) == 0 {
		// No names: every transfer (the master's watcher looks for
		// imports that never received anything).
		names = s.xfers.names()
	}
	for _, n := range names {
		out.Status = append(out.Status, s.xfers.status(n))
	}
	return out, nil
}

// impexpAbort cancels transfers; unknown names are ignored, so a retried
// call succeeds.
func (s *Server) impexpAbort(ctx context.Context, a nodeapi.ImpExpNames) (any, error) {
	for _, n := range a.Names {
		s.xfers.abort(n)
	}
	return nil, nil
}

// impexpCleanup aborts, waits for and forgets transfers; unknown names are
// ignored.
func (s *Server) impexpCleanup(ctx context.Context, a nodeapi.ImpExpNames) (any, error) {
	for _, n := range a.Names {
		s.xfers.cleanup(n)
	}
	return nil, nil
}
