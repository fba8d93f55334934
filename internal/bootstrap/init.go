package bootstrap

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/ganetidropin"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/storecfg"
)

// InitOptions describe a new cluster.
type InitOptions struct {
	Name                 string
	Layout               Layout
	MasterName           string // node name of this machine (default: hostname)
	MasterIP             string // address node daemons listen on (default 127.0.0.1)
	RPCPort              int    // node daemons' port (default 1811)
	JoinPort             int    // corrald's join listener (default 1812)
	EnabledHypervisors   []string
	HVParams             map[string]config.Params // overrides of the defaults
	EnabledDiskTemplates []string
	MACPrefix            string
	// NodeDirName names this machine's node daemon directories under the
	// state and run directories (default "node"; dev clusters use node1).
	NodeDirName string
	// Users: when false (tests as non-root) files keep the caller's owner.
	SetOwners bool
	// UIDPool is the cluster's uid pool; when set, kvm instances default to
	// security_model pool with use_chroot.
	UIDPool [][2]uint32
	// GanetiDropin turns on Ganeti drop-in mode (package ganetidropin):
	// corrald also serves Ganeti's LUXI sockets and ssconf files, under
	// GanetiRoot (default /; tests give a temporary directory whose last
	// component is the master's node name, for GANETI_ROOTDIR).
	GanetiDropin bool
	GanetiRoot   string
	// ClusterIP is the cluster's floating address (Ganeti's master IP), held
	// on MasterNetdev of the node the master runs on with prefix length
	// MasterNetmask (0: 32); "" for none. Not to be confused with MasterIP.
	ClusterIP     string
	MasterNetdev  string
	MasterNetmask int
}

// Init creates the cluster. It refuses to overwrite an existing one.
func Init(ctx context.Context, o InitOptions) error {
	if err := fill(&o); err != nil {
		return err
	}
	l := o.Layout
	// A cluster moved to etcd has a store record and no bbolt file.
	for _, f := range []string{storecfg.FileBolt, storecfg.FileName} {
		if _, err := os.Stat(filepath.Join(l.MasterDir(), f)); err == nil {
			return ecode.Errorf(ecode.Exists, "a cluster is already initialised in %s (destroy it first)", l.StateDir)
		}
	}
	var masterAcct Account
	var rapiOwner *Account
	adminGID := -1
	if o.SetOwners {
		if err := EnsureUsers(); err != nil {
			return err
		}
		var err error
		if masterAcct, err = Lookup(MasterUser); err != nil {
			return err
		}
		if adminGID, err = GroupID(AdminGroup); err != nil {
			return err
		}
		rapiAcct, err := Lookup(RAPIUser)
		if err != nil {
			return err
		}
		rapiOwner = &rapiAcct
	}
	// The state and run directories may exist (and be shared, like /run):
	// create them if missing but leave an existing one's mode alone. The
	// directories below them are ours and get exactly their modes.
	for _, d := range []string{l.StateDir, l.RunDir} {
		_, statErr := os.Stat(d)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if os.IsNotExist(statErr) {
			// Ours: 0755 whatever the umask made of it.
			if err := os.Chmod(d, 0o755); err != nil {
				return err
			}
		}
		if o.SetOwners {
			if err := CheckTraversable(d); err != nil {
				return err
			}
		}
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{l.MasterDir(), 0o700}, {l.NodeDir(o.NodeDirName), 0o700},
		{l.MasterRunDir(), 0o750}, {l.NodeRunDir(o.NodeDirName), 0o755},
	} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	if o.SetOwners {
		if err := os.Chown(l.MasterRunDir(), masterAcct.UID, adminGID); err != nil {
			return err
		}
	}
	ca, err := pki.NewCA(o.Name, 10*365*24*time.Hour)
	if err != nil {
		return err
	}
	md := l.MasterDir()
	if err := ca.Save(filepath.Join(md, layout.MasterCAFile), filepath.Join(md, layout.MasterCAKeyFile)); err != nil {
		return err
	}
	ip := net.ParseIP(o.MasterIP)
	if err := issue(ca, pki.RoleMaster, o.MasterName, ip, filepath.Join(md, layout.MasterCertFile), filepath.Join(md, layout.MasterKeyFile)); err != nil {
		return err
	}
	if err := pki.WriteSecretFile(filepath.Join(md, layout.DomainSecretFile), pki.NewDomainSecret()); err != nil {
		return err
	}
	nd := l.NodeDir(o.NodeDirName)
	if err := IssueNodeCert(ca, o.MasterName, ip, nd); err != nil {
		return err
	}
	if err := initRAPI(ca, l, o.MasterName, ip, rapiOwner); err != nil {
		return err
	}
	if err := writeConfig(ctx, o, filepath.Join(md, storecfg.FileBolt)); err != nil {
		return err
	}
	if o.SetOwners {
		if err := chownTree(md, masterAcct.UID, masterAcct.GID); err != nil {
			return err
		}
	}
	if o.GanetiDropin {
		return prepareGanetiDropin(o, masterAcct)
	}
	return nil
}

// prepareGanetiDropin creates Ganeti's directories for drop-in mode,
// handed to corrald's user and to the access group (gnt-admin if it
// exists, else corral-admin).
func prepareGanetiDropin(o InitOptions, masterAcct Account) error {
	owner, gid := -1, -1
	if o.SetOwners {
		g, err := ganetidropin.GroupID(ganetidropin.AccessGroup(AdminGroup))
		if err != nil {
			return err
		}
		owner, gid = masterAcct.UID, g
	}
	return ganetidropin.Prepare(ganetidropin.Layout{Root: o.GanetiRoot}, owner, gid)
}

// IssueNodeCert writes a node daemon's key, certificate and the CA into dir.
func IssueNodeCert(ca *pki.CA, name string, ip net.IP, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := issue(ca, pki.RoleNode, name, ip, filepath.Join(dir, layout.NodeCertFile), filepath.Join(dir, layout.NodeKeyFile)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, layout.NodeCAFile), ca.CertPEM(), 0o644)
}

func issue(ca *pki.CA, role pki.Role, name string, ip net.IP, certPath, keyPath string) error {
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return err
	}
	req := pki.IssueRequest{CommonName: name, Role: role, DNSNames: []string{name}, PublicKey: key.Public(), ValidFor: 5 * 365 * 24 * time.Hour}
	if ip != nil {
		req.IPs = []net.IP{ip}
	}
	certPEM, err := ca.Issue(req)
	if err != nil {
		return err
	}
	return pki.WriteKeyPair(certPath, keyPath, certPEM, keyPEM)
}

func fill(o *InitOptions) error {
	if o.Name == "" {
		return ecode.Errorf(ecode.Inval, "a cluster name is required")
	}
	if o.MasterName == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		o.MasterName = h
	}
	if o.MasterIP == "" {
		o.MasterIP = "127.0.0.1"
	}
	if net.ParseIP(o.MasterIP) == nil {
		return ecode.Errorf(ecode.Inval, "invalid master IP %q", o.MasterIP)
	}
	if err := config.CheckMasterNetwork(o.ClusterIP, o.MasterNetdev, o.MasterNetmask); err != nil {
		return err
	}
	if o.ClusterIP != "" && o.ClusterIP == o.MasterIP {
		return ecode.Errorf(ecode.Inval, "the cluster IP %s must differ from the master's own primary IP (--master-ip)", o.ClusterIP)
	}
	if o.RPCPort == 0 {
		o.RPCPort = config.DefaultRPCPort
	}
	if o.JoinPort == 0 {
		o.JoinPort = config.DefaultRPCPort + 1
	}
	if len(o.EnabledHypervisors) == 0 {
		o.EnabledHypervisors = []string{hypervisor.KVM, hypervisor.Fake}
	}
	for _, h := range o.EnabledHypervisors {
		if hypervisor.DefaultParams(h) == nil {
			return ecode.Errorf(ecode.Inval, "unknown hypervisor %q (known: kvm, fake)", h)
		}
	}
	if len(o.EnabledDiskTemplates) == 0 {
		o.EnabledDiskTemplates = []string{config.DTFile, config.DTDiskless}
	}
	if o.MACPrefix == "" {
		o.MACPrefix = config.DefaultMACPrefix
	}
	if o.GanetiRoot != "" && !o.GanetiDropin {
		return ecode.Errorf(ecode.Inval, "a Ganeti root (%s) is only used with Ganeti drop-in mode", o.GanetiRoot)
	}
	if o.GanetiDropin {
		root, err := ganetidropin.CleanRoot(o.GanetiRoot)
		if err != nil {
			return err
		}
		o.GanetiRoot = root
		// Before anything is created: never take over a real Ganeti.
		if err := ganetidropin.CheckNoGanetiCluster(ganetidropin.Layout{Root: root}); err != nil {
			return err
		}
	}
	return nil
}

// typed turns the hypervisor's textual defaults into JSON types where Ganeti
// sends booleans.
func typed(m map[string]string) config.Params {
	out := config.Params{}
	for k, v := range m {
		switch v {
		case "true":
			out[k] = true
		case "false":
			out[k] = false
		default:
			out[k] = v
		}
	}
	return out
}

func writeConfig(ctx context.Context, o InitOptions, path string) error {
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	hvp := map[string]config.Params{}
	for _, h := range []string{hypervisor.KVM, hypervisor.Fake} {
		hvp[h] = config.Fill(typed(hypervisor.DefaultParams(h)), o.HVParams[h])
	}
	confinedDefaults(o, hvp)
	c := &config.Cluster{
		Meta:                 config.Meta{Name: o.Name},
		ClusterName:          o.Name,
		JoinAddress:          net.JoinHostPort(o.MasterIP, strconv.Itoa(o.JoinPort)),
		RPCPort:              o.RPCPort,
		EnabledHypervisors:   o.EnabledHypervisors,
		HVParams:             hvp,
		BEParams:             config.DefaultBEParams(),
		NICParams:            config.DefaultNICParams(),
		NDParams:             config.Params{},
		OSParams:             map[string]config.Params{},
		EnabledDiskTemplates: o.EnabledDiskTemplates,
		MACPrefix:            o.MACPrefix,
		CandidatePoolSize:    config.DefaultCandidatePoolSize,
		MaxRunningJobs:       config.DefaultMaxRunningJobs,
		MaxTrackedJobs:       config.DefaultMaxTrackedJobs,
		JobQueueSize:         config.DefaultJobQueueSize,
		HiddenOS:             []string{},
		BlacklistedOS:        []string{},
		ConfigVersion:        config.ConfigVersion,
		UIDPool:              o.UIDPool,
		GanetiDropin:         o.GanetiDropin,
		GanetiRoot:           o.GanetiRoot,
		ClusterIP:            o.ClusterIP,
		MasterNetdev:         o.MasterNetdev,
		MasterNetmask:        o.MasterNetmask,
	}
	g := &config.NodeGroup{Meta: config.Meta{Name: "default"}, AllocPolicy: "preferred", NDParams: config.Params{}}
	m := &config.Node{Meta: config.Meta{Name: o.MasterName}, PrimaryIP: o.MasterIP, SecondaryIP: o.MasterIP,
		MasterCandidate: true, MasterCapable: true, VMCapable: true, NDParams: config.Params{}}
	if _, err := confdb.Bootstrap(ctx, st, c, g, m); err != nil {
		return err
	}
	return nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
