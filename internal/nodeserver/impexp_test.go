package nodeserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/osapi"
	"github.com/corral/corral/internal/storage"
)

// testNode is a node daemon without its RPC server: the handlers are
// called directly.
func testNode(t *testing.T, name string) *Server {
	t.Helper()
	d := t.TempDir()
	s := &Server{
		opts: Options{StateDir: d, Listen: "127.0.0.1:1811", ExportDir: filepath.Join(d, "export"),
			OSSearchPath: []string{filepath.Join(d, "os")}},
		log: discardLog(), name: name,
		storage: map[string]storage.Backend{storage.TemplateFile: storage.NewFile(filepath.Join(d, "storage"))},
	}
	s.osRunner = &osapi.Runner{LogDir: filepath.Join(d, "os-logs"), Logger: s.log, Timeout: time.Minute}
	s.certs = newCertStore(filepath.Join(d, "crypto"), name, fastCert, s.log)
	s.xfers = newTransfers(s.log)
	s.exports = exportDir{dir: s.opts.ExportDir, node: name}
	t.Cleanup(func() {
		// Nothing may outlive the test.
		s.xfers.mu.Lock()
		var names []string
		for n := range s.xfers.m {
			names = append(names, n)
		}
		s.xfers.mu.Unlock()
		for _, n := range names {
			s.xfers.cleanup(n)
		}
	})
	return s
}

// newKey makes a transfer key on s and returns its name and certificate.
func newKey(t *testing.T, s *Server) (string, string) {
	t.Helper()
	name, cert, err := s.certs.create(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return name, string(cert)
}

// pairOptions returns the options of the two ends of a transfer between a
// and b.
func pairOptions(t *testing.T, a, b *Server, compress string) (nodeapi.ImpExpOptions, nodeapi.ImpExpOptions) {
	t.Helper()
	ka, ca := newKey(t, a)
	kb, cb := newKey(t, b)
	return nodeapi.ImpExpOptions{KeyName: ka, PeerCertPEM: cb, Magic: "magic-0123", Compress: compress},
		nodeapi.ImpExpOptions{KeyName: kb, PeerCertPEM: ca, Magic: "magic-0123", Compress: compress}
}

// waitDone waits for a transfer's goroutine and returns its status.
func waitDone(t *testing.T, s *Server, name string) nodeapi.TransferStatus {
	t.Helper()
	s.xfers.mu.Lock()
	tr := s.xfers.m[name]
	s.xfers.mu.Unlock()
	if tr == nil {
		t.Fatalf("no transfer %s", name)
	}
	select {
	case <-tr.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("transfer %s did not end", name)
	}
	return s.xfers.status(name)
}

func startImport(t *testing.T, s *Server, a nodeapi.ImportStartArgs) nodeapi.ImportStartReply {
	t.Helper()
	r, err := s.importStart(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return r.(nodeapi.ImportStartReply)
}

func startExport(t *testing.T, s *Server, a nodeapi.ExportStartArgs) string {
	t.Helper()
	r, err := s.exportStart(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return r.(nodeapi.ExportStartReply).Name
}

func checkOK(t *testing.T, st nodeapi.TransferStatus, size int) {
	t.Helper()
	if !st.Known || !st.Done || !st.OK || st.Error != "" {
		t.Fatalf("transfer %s: %+v", st.Name, st)
	}
	if st.Bytes != int64(size) {
		t.Fatalf("transfer %s moved %d bytes, want %d", st.Name, st.Bytes, size)
	}
}

func testInstance(sizeMiB int64) nodeapi.InstanceSpec {
	return nodeapi.InstanceSpec{Name: "inst1.example.com", UUID: "0b8ab3f4-3d0c-4a52-9d70-6c1d0b7e1f01", OS: "dummy",
		DiskTemplate: storage.TemplateFile,
		Disks:        []nodeapi.DiskSpec{{UUID: "5d0e0a3e-6a59-4f5c-8d8e-2f3f5d6b9a10", SizeMiB: sizeMiB, Mode: "rw"}}}
}

// An export moves node A's export file into node B's export being built;
// B finalizes it and sends it back into A's instance disk.
func TestTransferFileAndDisk(t *testing.T) {
	a, b := testNode(t, "node-a"), testNode(t, "node-b")
	data := make([]byte, 3<<20)
	rand.Read(data)

	// A finished export of inst1 on A.
	p, err := a.exports.importPath("inst1.example.com", "disk0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.exports.finalize("inst1.example.com", "[export]\n"); err != nil {
		t.Fatal(err)
	}

	optA, optB := pairOptions(t, a, b, "gzip")
	imp := startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0",
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: "inst1.example.com", FileName: "disk0"}})
	if imp.Host != "127.0.0.1" || imp.Port == 0 || !strings.HasPrefix(imp.Name, "import-disk0-") {
		t.Fatalf("import reply %+v", imp)
	}
	exp := startExport(t, a, nodeapi.ExportStartArgs{Options: optA, Component: "disk0", Host: imp.Host, Port: imp.Port,
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: "inst1.example.com", FileName: "disk0"}})
	if !strings.HasPrefix(exp, "export-disk0-") {
		t.Fatalf("export name %q", exp)
	}
	checkOK(t, waitDone(t, a, exp), len(data))
	st := waitDone(t, b, imp.Name)
	checkOK(t, st, len(data))
	if st.ListenPort != imp.Port || st.MiB != 3 {
		t.Fatalf("import status %+v", st)
	}
	if err := b.exports.finalize("inst1.example.com", "[export]\nversion = 0\n"); err != nil {
		t.Fatal(err)
	}
	path, _, err := b.exports.info("inst1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(path, "disk0"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("B's export differs (%d bytes, %v)", len(got), err)
	}

	// Back into an instance disk on A (made by blockdev_create, sparse).
	inst := testInstance(3)
	disk, err := a.storage[storage.TemplateFile].Create(context.Background(), inst.UUID,
		diskOf(inst.DiskTemplate, inst.Disks[0]), storage.KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	optA, optB = pairOptions(t, a, b, "zstd")
	imp = startImport(t, a, nodeapi.ImportStartArgs{Options: optA, Component: "disk0",
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: inst, Disk: 0, SizeMiB: 3}})
	exp = startExport(t, b, nodeapi.ExportStartArgs{Options: optB, Component: "disk0", Host: imp.Host, Port: imp.Port,
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: "inst1.example.com", FileName: "disk0"}})
	checkOK(t, waitDone(t, b, exp), len(data))
	st = waitDone(t, a, imp.Name)
	checkOK(t, st, len(data))
	if st.Percent != 100 {
		t.Fatalf("disk import percent %v", st.Percent)
	}
	got, err = os.ReadFile(disk)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("A's disk differs (%d bytes, %v)", len(got), err)
	}
	if dirty, wb := pageCache(t, disk); dirty != 0 || wb != 0 {
		t.Fatalf("disk import acknowledged with %d pages dirty, %d under writeback", dirty, wb)
	}

	// A disk import of the wrong size fails: the stream is short.
	big := testInstance(4)
	big.UUID = "0b8ab3f4-3d0c-4a52-9d70-6c1d0b7e1f02"
	if _, err := a.storage[storage.TemplateFile].Create(context.Background(), big.UUID,
		diskOf(big.DiskTemplate, big.Disks[0]), storage.KeepOwner()); err != nil {
		t.Fatal(err)
	}
	optA, optB = pairOptions(t, a, b, "none")
	imp = startImport(t, a, nodeapi.ImportStartArgs{Options: optA, Component: "disk0",
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: big, Disk: 0, SizeMiB: 4}})
	exp = startExport(t, b, nodeapi.ExportStartArgs{Options: optB, Component: "disk0", Host: imp.Host, Port: imp.Port,
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: "inst1.example.com", FileName: "disk0"}})
	if st := waitDone(t, a, imp.Name); st.OK || st.Error == "" {
		t.Fatalf("short disk import succeeded: %+v", st)
	}
	if st := waitDone(t, b, exp); st.OK {
		t.Fatalf("export into a failed import succeeded: %+v", st)
	}

	// Cleanup forgets finished transfers.
	if _, err := a.impexpCleanup(context.Background(), nodeapi.ImpExpNames{Names: []string{imp.Name}}); err != nil {
		t.Fatal(err)
	}
	if st := a.xfers.status(imp.Name); st.Known {
		t.Fatalf("cleaned-up transfer still known: %+v", st)
	}
}

// An import nobody connects to is aborted; cleanup removes its partial
// file, and so does expiry of a failed one nobody cleans up.
func TestTransferAbortCleanup(t *testing.T) {
	b := testNode(t, "node-b")
	a := testNode(t, "node-a")
	_, optB := pairOptions(t, a, b, "none")
	ioFile := func(name string) nodeapi.ImpExpIO {
		return nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: name, FileName: "disk0"}
	}
	imp := startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0", IO: ioFile("inst1")})
	st := b.xfers.status(imp.Name)
	if !st.Known || st.Done || st.Connected || st.ListenPort != imp.Port {
		t.Fatalf("waiting import: %+v", st)
	}
	partial := filepath.Join(b.opts.ExportDir, "inst1.new", "disk0")
	if _, err := os.Stat(partial); err != nil {
		t.Fatalf("import file: %v", err)
	}
	if _, err := b.impexpAbort(context.Background(), nodeapi.ImpExpNames{Names: []string{imp.Name, "import-x-1-abcdef"}}); err != nil {
		t.Fatal(err)
	}
	st = waitDone(t, b, imp.Name)
	if st.OK || !strings.Contains(st.Error, "abort") {
		t.Fatalf("aborted import: %+v", st)
	}
	if _, err := b.impexpCleanup(context.Background(), nodeapi.ImpExpNames{Names: []string{imp.Name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Fatalf("partial file after cleanup: %v", err)
	}
	if st := b.xfers.status(imp.Name); st.Known {
		t.Fatalf("status after cleanup: %+v", st)
	}

	// Cleanup of a running import aborts it first.
	imp = startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk1", IO: ioFile("inst2")})
	b.xfers.cleanup(imp.Name)
	if st := b.xfers.status(imp.Name); st.Known {
		t.Fatalf("status after cleanup of a running import: %+v", st)
	}

	// Expiry.
	imp = startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0", IO: ioFile("inst3")})
	b.xfers.abort(imp.Name)
	waitDone(t, b, imp.Name)
	later := time.Now().Add(transferKeep + time.Minute)
	b.xfers.now = func() time.Time { return later }
	if st := b.xfers.status(imp.Name); st.Known {
		t.Fatalf("expired transfer still known: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(b.opts.ExportDir, "inst3.new", "disk0")); !os.IsNotExist(err) {
		t.Fatalf("partial file of an expired import: %v", err)
	}
}

func TestTransferStatusUnknown(t *testing.T) {
	s := testNode(t, "node-a")
	r, err := s.impexpStatus(context.Background(), nodeapi.ImpExpNames{Names: []string{"import-disk0-1-abcdef", "../x"}})
	if err != nil {
		t.Fatal(err)
	}
	got := r.(nodeapi.ImpExpStatusReply).Status
	if len(got) != 2 || got[0].Known || got[1].Known || got[0].Name != "import-disk0-1-abcdef" || got[1].Name != "../x" {
		t.Fatalf("status %+v", got)
	}
	for _, f := range []func(context.Context, nodeapi.ImpExpNames) (any, error){s.impexpAbort, s.impexpCleanup} {
		if _, err := f(context.Background(), nodeapi.ImpExpNames{Names: []string{"nope"}}); err != nil {
			t.Fatalf("unknown name: %v", err)
		}
	}
}

// Bad input is refused before anything listens or runs, and errors never
// quote key material.
func TestTransferBadInput(t *testing.T) {
	a, b := testNode(t, "node-a"), testNode(t, "node-b")
	good, _ := pairOptions(t, a, b, "none")
	keyPEM, err := os.ReadFile(filepath.Join(a.certs.dir, good.KeyName, transferKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	goodIO := nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: "inst1", FileName: "disk0"}
	with := func(f func(*nodeapi.ImpExpOptions, *nodeapi.ImpExpIO)) (nodeapi.ImpExpOptions, nodeapi.ImpExpIO) {
		o, x := good, goodIO
		f(&o, &x)
		return o, x
	}
	for _, tc := range []struct {
		name string
		f    func(*nodeapi.ImpExpOptions, *nodeapi.ImpExpIO)
	}{
		{"key traversal", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.KeyName = "../" + o.KeyName }},
		{"missing key", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.KeyName = "x509-1-abcdef01" }},
		{"key as peer", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.PeerCertPEM = string(keyPEM) }},
		{"two peers", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.PeerCertPEM += o.PeerCertPEM }},
		{"garbage peer", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) {
			o.PeerCertPEM = "-----BEGIN CERTIFICATE-----\nc2VjcmV0\n-----END CERTIFICATE-----\n"
		}},
		{"short magic", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.Magic = "abc" }},
		{"magic with space", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.Magic = "abc def" }},
		{"compression", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.Compress = "lzma" }},
		{"retries", func(o *nodeapi.ImpExpOptions, _ *nodeapi.ImpExpIO) { o.ConnectRetries = -1 }},
		{"kind", func(_ *nodeapi.ImpExpOptions, x *nodeapi.ImpExpIO) { x.Kind = "pipe" }},
		{"export name", func(_ *nodeapi.ImpExpOptions, x *nodeapi.ImpExpIO) { x.ExportName = "../etc" }},
		{"file name", func(_ *nodeapi.ImpExpOptions, x *nodeapi.ImpExpIO) { x.FileName = "../../disk0" }},
		{"disk index", func(_ *nodeapi.ImpExpOptions, x *nodeapi.ImpExpIO) {
			*x = nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: testInstance(1), Disk: 1}
		}},
		{"disk template", func(_ *nodeapi.ImpExpOptions, x *nodeapi.ImpExpIO) {
			*x = nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: testInstance(1)}
			x.Instance.DiskTemplate = "drbd"
		}},
		{"instance uuid", func(_ *nodeapi.ImpExpOptions, x *nodeapi.ImpExpIO) {
			*x = nodeapi.ImpExpIO{Kind: nodeapi.IODisk, Instance: testInstance(1)}
			x.Instance.UUID = "../../etc"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, x := with(tc.f)
			_, ierr := a.importStart(context.Background(), nodeapi.ImportStartArgs{Options: o, IO: x, Component: "disk0"})
			_, eerr := a.exportStart(context.Background(), nodeapi.ExportStartArgs{Options: o, IO: x, Component: "disk0",
				Host: "127.0.0.1", Port: 9})
			for _, err := range []error{ierr, eerr} {
				if ecode.ClassOf(err) != ecode.Inval {
					t.Fatalf("got %v, want an input error", err)
				}
				if strings.Contains(err.Error(), "PRIVATE") || strings.Contains(err.Error(), "c2VjcmV0") {
					t.Fatalf("error quotes key material: %v", err)
				}
			}
		})
	}
	if _, err := a.importStart(context.Background(), nodeapi.ImportStartArgs{Options: good, IO: goodIO, Component: "../x"}); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("bad component: %v", err)
	}
	if _, err := a.exportStart(context.Background(), nodeapi.ExportStartArgs{Options: good, IO: goodIO, Component: "disk0", Host: "127.0.0.1"}); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("port 0: %v", err)
	}
	a.xfers.mu.Lock()
	n := len(a.xfers.m)
	a.xfers.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d transfers registered by bad calls", n)
	}
}

// dummyOS installs an OS definition whose export and import scripts copy
// the disk image; the import fails for instance fail.example.com after
// reading part of its input.
func dummyOS(t *testing.T, s *Server) {
	t.Helper()
	dir := filepath.Join(s.opts.OSSearchPath[0], "dummy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"ganeti_api_version": "10\n",
		"create":             "#!/bin/sh\nexit 0\n",
		"rename":             "#!/bin/sh\nexit 0\n",
		"export": "#!/bin/sh\nset -e\nif [ \"$INSTANCE_NAME\" = failexp.example.com ]; then\n" +
			"  head -c 100000 \"$EXPORT_DISK_PATH\"; echo 'the imaginary disk broke' >&2; exit 4\nfi\n" +
			"cat \"$EXPORT_DISK_PATH\"\necho \"exported disk $EXPORT_INDEX\" >&2\n",
		"import": "#!/bin/sh\nset -e\nif [ \"$INSTANCE_NAME\" = fail.example.com ]; then\n" +
			"  head -c 1000 >/dev/null; echo 'no space left on the imaginary device' >&2; exit 3\nfi\n" +
			"dd of=\"$IMPORT_DISK_PATH\" bs=64k conv=notrunc status=none\necho \"imported disk $IMPORT_INDEX\" >&2\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func createDisk(t *testing.T, s *Server, inst nodeapi.InstanceSpec) string {
	t.Helper()
	p, err := s.storage[storage.TemplateFile].Create(context.Background(), inst.UUID,
		diskOf(inst.DiskTemplate, inst.Disks[0]), storage.KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The OS scripts stream through pipes on both ends; their last output
// lines appear in the status, and a failing import script fails the
// transfer on both ends.
func TestTransferScripts(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	a, b := testNode(t, "node-a"), testNode(t, "node-b")
	dummyOS(t, a)
	dummyOS(t, b)
	inst := testInstance(2)
	src, dst := createDisk(t, a, inst), createDisk(t, b, inst)
	data := make([]byte, 2<<20)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	optA, optB := pairOptions(t, a, b, "gzip-fast")
	scriptIO := nodeapi.ImpExpIO{Kind: nodeapi.IOScript, Instance: inst, Disk: 0, SizeMiB: 2}
	imp := startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0", IO: scriptIO})
	exp := startExport(t, a, nodeapi.ExportStartArgs{Options: optA, Component: "disk0", Host: imp.Host, Port: imp.Port, IO: scriptIO})
	est := waitDone(t, a, exp)
	checkOK(t, est, len(data))
	ist := waitDone(t, b, imp.Name)
	checkOK(t, ist, len(data))
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("imported disk differs (%d bytes, %v)", len(got), err)
	}
	if !slices.Contains(est.Recent, "exported disk 0") || !slices.Contains(ist.Recent, "imported disk 0") {
		t.Fatalf("recent output: export %q, import %q", est.Recent, ist.Recent)
	}
	// The script does not sync; the import did before it acknowledged.
	if dirty, wb := pageCache(t, dst); dirty != 0 || wb != 0 {
		t.Fatalf("imported disk acknowledged with %d pages dirty, %d under writeback", dirty, wb)
	}

	// An export script that fails half-way fails both ends: its output
	// is not mistaken for a whole disk.
	broken := inst
	broken.Name = "failexp.example.com"
	optA, optB = pairOptions(t, a, b, "none")
	imp = startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0",
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: "inst1.example.com", FileName: "disk0"}})
	exp = startExport(t, a, nodeapi.ExportStartArgs{Options: optA, Component: "disk0", Host: imp.Host, Port: imp.Port,
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOScript, Instance: broken, Disk: 0}})
	if est := waitDone(t, a, exp); est.OK || !strings.Contains(est.Error, "exit status 4") {
		t.Fatalf("failing export script: %+v", est)
	}
	if ist := waitDone(t, b, imp.Name); ist.OK {
		t.Fatalf("import of a failed export script's output succeeded: %+v", ist)
	}

	bad := inst
	bad.Name = "fail.example.com"
	optA, optB = pairOptions(t, a, b, "none")
	imp = startImport(t, b, nodeapi.ImportStartArgs{Options: optB, Component: "disk0",
		IO: nodeapi.ImpExpIO{Kind: nodeapi.IOScript, Instance: bad, Disk: 0}})
	exp = startExport(t, a, nodeapi.ExportStartArgs{Options: optA, Component: "disk0", Host: imp.Host, Port: imp.Port, IO: scriptIO})
	ist = waitDone(t, b, imp.Name)
	if ist.OK || !strings.Contains(ist.Error, "exit status 3") || !slices.Contains(ist.Recent, "no space left on the imaginary device") {
		t.Fatalf("failing import script: %+v", ist)
	}
	if est := waitDone(t, a, exp); est.OK {
		t.Fatalf("export into a failed import script: %+v", est)
	}
}

// FuzzParsePeerCert: whatever the text, the result is one certificate or
// an input error that quotes none of it.
func FuzzParsePeerCert(f *testing.F) {
	certPEM, keyPEM, err := fastCert("node-a", time.Hour, time.Now())
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(certPEM), string(certPEM) + string(certPEM), string(keyPEM), "", "-----BEGIN CERTIFICATE-----\nzz\n-----END CERTIFICATE-----\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parsePeerCert(text)
		if err != nil {
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("error class %v", err)
			}
			if len(text) > 8 && strings.Contains(err.Error(), text) {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		if c == nil || len(c.Raw) == 0 {
			t.Fatal("accepted without a certificate")
		}
	})
}

// pageCache reports how many of a file's pages are dirty or under
// writeback (cachestat, Linux 6.5). It skips the test where that cannot be
// known: an older kernel, or tmpfs, whose pages never go to a disk.
func pageCache(t *testing.T, path string) (dirty, writeback uint64) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs: no disk to write back to")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			t.Skip("no cachestat on this kernel")
		}
		t.Fatal(err)
	}
	return st.Dirty, st.Writeback
}
