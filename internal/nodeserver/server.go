// Package nodeserver is corral-node, the node daemon: an HTTPS server with
// mutual TLS that accepts calls only from master-candidate certificates of
// the current epoch, and carries them out with the hypervisor, storage and
// OS-definition packages. It is the only Corral daemon that runs as root.
package nodeserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/corral/corral/internal/baremetal/provnet"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/fake"
	"github.com/corral/corral/internal/hypervisor/kvm"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/osapi"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rpc"
	"github.com/corral/corral/internal/seconds"
	"github.com/corral/corral/internal/storage"
)

// Version must equal the master's.
const Version = layout.Version

// Files in the node's state directory.
const (
	FileCert = layout.NodeCertFile
	FileKey  = layout.NodeKeyFile
	FileCA   = layout.NodeCAFile
)

// Options configure corral-node.
type Options struct {
	StateDir       string
	RunDir         string
	Listen         string // ip:port
	OSSearchPath   []string
	FileStorageDir string // default <StateDir>/storage/file
	ExportDir      string // default <StateDir>/export
	QemuUser       string // default corral-qemu
	SSHDir         string // root's SSH directory for per-node keys; "" manages none (sshkeys.go)
	Hypervisors    []string
	FakeCapacity   hypervisor.NodeResources
	Logger         *slog.Logger
	// Failpoints, when armed, kill the daemon around instance starts and
	// stops (crash tests); nil in production.
	Failpoints *failpoint.Set
	// PoolFirewall is poolfw.ModeNftables to keep nftables rules that stop
	// pool uids from opening connections, or "" / poolfw.ModeNone
	// (poolfirewall.go).
	PoolFirewall string
	// MachineMedia configures the boot ISOs of bare-metal machines booting
	// through virtual media (machinemedia.go).
	MachineMedia MachineMediaOptions
	// MachineNetworks are the provisioning networks of bare-metal machines
	// (--baremetal-networks): PXE boots and network moves
	// (machinenets.go). nil: none.
	MachineNetworks *provnet.Config
	// MachineNetworksDir holds their state (dnsmasq's files, the prepared
	// boots); default <StateDir>/provnet. dnsmasq reads it after dropping
	// its privileges: every directory above it must be searchable by
	// others.
	MachineNetworksDir string
	// COEDir holds the control planes of COE clusters (coe.go); default
	// <StateDir>/coe (corral-node's default is <state-dir>-coe). Every
	// directory above it must let the clusters' uids through.
	COEDir string
	// K8sToolsDir is where the Kubernetes binaries are (k8sbin.Dir).
	K8sToolsDir string
	// COEUIDPool is the uids the control planes run under
	// (DefaultCOEUIDPool when empty).
	COEUIDPool string
	// NoClusterCommands refuses the RPCs of `corral cluster command` and
	// `cluster copyfile` (corral-node --cluster-commands=false).
	NoClusterCommands bool
	// MasterIPNetns is the network namespace the master network device is
	// in when this node holds the cluster's master IP (masterip.go); "":
	// the daemon's own. Several nodes on one machine (a dev cluster) each
	// get one of their own.
	MasterIPNetns string
}

// Server is a running node daemon.
type Server struct {
	opts     Options
	log      *slog.Logger
	name     string
	certEnd  atomic.Int64 // NotAfter (Unix) of the served certificate; renewed in nodecert.go
	hvs      map[string]hypervisor.Hypervisor
	storage  map[string]storage.Backend
	osRunner *osapi.Runner
	rpc      *rpc.Server
	qemuUID  int
	qemuGID  int
	certs    *certStore     // transfer keys (x509certs.go)
	exports  exportDir      // the export directory (exports.go)
	xfers    *transfers     // running and finished imports and exports (impexp.go)
	snaps    *snapshotStore // point-in-time copies of running instances' disks (snapshots.go)
	poolFw   poolRules      // owner rules for pool uids (poolfirewall.go)
	media    *machineMedia  // bare-metal machines' boot ISOs (machinemedia.go)
	nets     machineNets    // bare-metal provisioning networks (machinenets.go); nil: none
	coe      *coePlanes     // COE clusters' control planes (coe.go)
	migKeys  migrationKeys  // keys of migration certificates (migrate.go)
}

// New prepares the daemon: it loads its certificate (the node must have
// joined) and its hypervisors.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FileStorageDir == "" {
		opts.FileStorageDir = filepath.Join(opts.StateDir, "storage", "file")
	}
	if opts.QemuUser == "" {
		opts.QemuUser = "corral-qemu"
	}
	if len(opts.OSSearchPath) == 0 {
		opts.OSSearchPath = osapi.DefaultSearchPath()
	}
	if len(opts.Hypervisors) == 0 {
		opts.Hypervisors = []string{hypervisor.KVM, hypervisor.Fake}
	}
	s := &Server{opts: opts, log: opts.Logger, hvs: map[string]hypervisor.Hypervisor{}, qemuUID: -1, qemuGID: -1}
	if err := recoverCertSwitch(opts.StateDir); err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(filepath.Join(opts.StateDir, FileCert))
	if err != nil {
		return nil, fmt.Errorf("node certificate missing in %s (join the cluster first: corral-node join TOKEN): %w", opts.StateDir, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(opts.StateDir, FileKey))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(opts.StateDir, FileCA))
	if err != nil {
		return nil, err
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("bad node certificate: %v", err)
	}
	s.name = certs[0].Subject.CommonName
	s.certEnd.Store(certs[0].NotAfter.Unix())
	if u, err := user.Lookup(opts.QemuUser); err == nil {
		s.qemuUID, _ = strconv.Atoi(u.Uid)
		s.qemuGID, _ = strconv.Atoi(u.Gid)
	}
	for _, name := range opts.Hypervisors {
		switch name {
		case hypervisor.Fake:
			h, err := fake.New(filepath.Join(opts.StateDir, "fake"), opts.FakeCapacity)
			if err != nil {
				return nil, err
			}
			s.hvs[name] = h
		case hypervisor.KVM:
			runAs := opts.QemuUser
			if os.Geteuid() != 0 {
				runAs = ""
			}
			h, err := kvm.New(kvm.Options{RunDir: filepath.Join(opts.RunDir, "kvm"), StateDir: filepath.Join(opts.StateDir, "kvm"),
				RunAsUser: runAs, Logger: opts.Logger, CgroupParent: "corral-" + s.name})
			if err != nil {
				return nil, err
			}
			s.hvs[name] = h
		default:
			return nil, fmt.Errorf("unknown hypervisor %q", name)
		}
	}
	s.storage = map[string]storage.Backend{
		storage.TemplateDiskless: storage.NewDiskless(),
		storage.TemplateFile:     storage.NewFile(opts.FileStorageDir),
		storage.TemplateRBD:      storage.NewRBD(),
	}
	s.osRunner = &osapi.Runner{LogDir: filepath.Join(opts.StateDir, "os-logs"), Logger: opts.Logger, Timeout: 30 * time.Minute}
	if s.media, err = openMachineMedia(opts.StateDir, opts.Listen, opts.MachineMedia, opts.Logger); err != nil {
		return nil, err
	}
	if s.nets, err = openMachineNets(opts.StateDir, opts.MachineNetworksDir, opts.MachineMedia.AgentRamdisk, opts.MachineNetworks, opts.Logger); err != nil {
		s.media.close()
		return nil, err
	}
	if opts.COEDir == "" {
		opts.COEDir = filepath.Join(opts.StateDir, "coe")
	}
	if opts.COEUIDPool == "" {
		opts.COEUIDPool = DefaultCOEUIDPool
	}
	if s.coe, err = openCOEPlanes(opts.COEDir, opts.K8sToolsDir, opts.COEUIDPool, opts.Logger); err != nil {
		s.media.close()
		return nil, err
	}
	s.rpc, err = rpc.NewServer(rpc.ServerOptions{CertPEM: certPEM, KeyPEM: keyPEM, CAPEM: caPEM,
		StateDir: filepath.Join(opts.StateDir, "rpc"), Logger: opts.Logger})
	if err != nil {
		s.coe.close()
		s.media.close()
		return nil, err
	}
	s.routes()
	return s, nil
}

// Name is the node's name from its certificate.
func (s *Server) Name() string { return s.name }

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	// The control planes keep running when the daemon ends; the next
	// one adopts them.
	defer s.coe.close()
	if err := s.startPoolFirewall(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.opts.Listen, err)
	}
	if s.nets != nil {
		// The namespace, its bridges and the machines' ports outlive the
		// daemon (machines stay wired across a restart); the dnsmasqs,
		// boot servers and API forwarders stop with it.
		if err := s.nets.Start(ctx); err != nil {
			ln.Close()
			return fmt.Errorf("bare-metal networks: %w", err)
		}
		defer func() {
			if err := s.nets.Close(); err != nil {
				s.log.Error("stopping the bare-metal networks", "err", err)
			}
		}()
		s.log.Info("bare-metal networks running", "netns", s.nets.Config().Netns, "networks", len(s.nets.Config().Networks))
	}
	s.log.Info("corral-node serving", "node", s.name, "listen", ln.Addr().String(), "pid", os.Getpid())
	if s.media.enabled() {
		go func() {
			if err := s.media.serve(ctx); err != nil {
				s.log.Error("machine boot media server stopped", "err", err)
			}
		}()
	}
	err = s.rpc.Serve(ctx, ln)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func handle[A any](s *Server, method string, f func(ctx context.Context, a A) (any, error)) {
	s.rpc.Handle(method, func(ctx context.Context, raw json.RawMessage) (any, error) {
		var a A
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, ecode.Errorf(ecode.Inval, "%s: bad arguments: %v", method, err)
			}
		}
		return f(ctx, a)
	})
}

func (s *Server) routes() {
	handle(s, nodeapi.Version, func(ctx context.Context, _ struct{}) (any, error) {
		return nodeapi.VersionReply{Version: Version, Protocol: 1, Time: now()}, nil
	})
	handle(s, nodeapi.NodeInfo, s.nodeInfo)
	handle(s, nodeapi.InstanceStart, s.instanceStart)
	handle(s, nodeapi.InstanceShutdown, s.instanceShutdown)
	handle(s, nodeapi.InstanceReboot, s.instanceReboot)
	handle(s, nodeapi.InstanceList, s.instanceList)
	handle(s, nodeapi.DiskCreate, s.diskCreate)
	handle(s, nodeapi.DiskRemove, s.diskRemove)
	handle(s, nodeapi.DiskList, s.diskList)
	handle(s, nodeapi.DiskGrow, s.diskGrow)
	handle(s, nodeapi.DiskConvert, s.diskConvert)
	handle(s, nodeapi.Hotplug, s.instanceHotplug)
	handle(s, nodeapi.OSCreate, s.osCreate)
	handle(s, nodeapi.OSRename, s.osRename)
	handle(s, nodeapi.OSDiagnose, s.osDiagnose)
	handle(s, nodeapi.OSValidate, s.osValidate)
	handle(s, nodeapi.ProcessList, s.hypervisorProcesses)
	handle(s, nodeapi.EtcdMemberStart, s.etcdMemberStart)
	handle(s, nodeapi.COEControlPlaneReserve, s.coeReserve)
	handle(s, nodeapi.COEControlPlaneStart, s.coeStart)
	handle(s, nodeapi.COEControlPlaneStatus, s.coeStatus)
	handle(s, nodeapi.COEControlPlaneStop, s.coeStop)
	handle(s, nodeapi.COEKubeletStart, s.coeKubeletStart)
	handle(s, nodeapi.COEKubeletStop, s.coeKubeletStop)
	handle(s, nodeapi.EtcdMemberStop, s.etcdMemberStop)
	handle(s, nodeapi.TestDelay, func(ctx context.Context, a nodeapi.DelayArgs) (any, error) {
		t := time.NewTimer(seconds.Duration(a.Duration))
		defer t.Stop()
		select {
		case <-t.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	s.rpc.HandleStream(nodeapi.Console, s.console)
	s.impexpRoutes()
	s.snapshotRoutes()
	s.sshRoutes()
	s.certRoutes()
	s.machineRoutes()
	s.instanceRescueRoutes()
	s.migrationRoutes()
	s.maintRoutes()
	handle(s, nodeapi.StorageList, s.storageList)
}

func now() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

func (s *Server) hv(name string) (hypervisor.Hypervisor, error) {
	if name == "" {
		for _, n := range s.opts.Hypervisors {
			return s.hvs[n], nil
		}
	}
	h, ok := s.hvs[name]
	if !ok {
		return nil, ecode.Errorf(ecode.Environ, "hypervisor %q is not enabled on node %s", name, s.name)
	}
	return h, nil
}

// backend is the storage of a template on this node; sharedDir is the
// cluster's shared directory, which the sharedfile template needs.
func (s *Server) backend(template, sharedDir string) (storage.Backend, error) {
	if template == storage.TemplateSharedFile {
		return storage.ForTemplate(template, "", sharedDir)
	}
	b, ok := s.storage[template]
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "disk template %q is not supported on node %s", template, s.name)
	}
	return b, nil
}

func (s *Server) nodeInfo(ctx context.Context, a nodeapi.NodeInfoArgs) (any, error) {
	h, err := s.hv(a.Hypervisor)
	if err != nil {
		return nil, err
	}
	res, err := h.NodeInfo(ctx)
	if err != nil {
		return nil, err
	}
	total, free, err := s.storage[storage.TemplateFile].Free(ctx)
	if err != nil {
		return nil, err
	}
	count := 0
	for _, h := range s.hvs {
		if l, err := h.List(ctx); err == nil {
			count += len(l)
		}
	}
	return nodeapi.NodeInfoReply{
		Name: s.name, Version: Version, Time: now(),
		MemoryTotalMiB: res.MemoryTotalMiB, MemoryFreeMiB: res.MemoryFreeMiB, MemoryNodeMiB: res.MemoryNodeMiB,
		CPUs: res.CPUs, DiskTotalMiB: total, DiskFreeMiB: free, Hypervisors: s.opts.Hypervisors,
		Instances: count, CertNotAfter: float64(s.certEnd.Load()),
	}, nil
}
