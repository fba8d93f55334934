package controlplane

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// What a kubelet worker leaves on the host outside its directory, and
// how CleanWorkerHost finds it again:
//   - its pods' processes and cgroups: under CgroupRoot in every
//     hierarchy;
//   - containerd's shims: processes whose -address is the worker's socket;
//   - mounts (the kubelet's root directory, pod volumes, container root
//     file systems, network namespaces): under the worker's directories;
//   - the shims' sockets: /run/containerd/s/<sha256 of socket/ns/id>,
//     a path containerd 1.6 does not let a configuration change;
//   - the pod bridge, and the links /var/log/containers/*.log into the
//     worker's pod logs;
//   - CNI's cached results, /var/lib/cni/results/<network>-<container>-<if>,
//     of pods torn down without their network;
//   - the kubelet's device plugin socket, whose path no configuration
//     changes: /var/lib/kubelet/device-plugins/kubelet.sock.

// cgroupMounts are the mount points of the cgroup hierarchies under root.
func cgroupMounts(root string) ([]string, error) {
	var out []string
	err := eachMount(func(mountPoint, fsType string) {
		// Under root for cgroup v1 (and a hybrid's unified hierarchy),
		// root itself for cgroup v2 alone.
		if (fsType == "cgroup" || fsType == "cgroup2") && (mountPoint == root || strings.HasPrefix(mountPoint, root+"/")) {
			out = append(out, mountPoint)
		}
	})
	return out, err
}

// eachMount calls f with the mount point and type of every mount of this
// process's mount namespace.
func eachMount(f func(mountPoint, fsType string)) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mount-point options... - type source super
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		f(unescapeMount(fields[4]), fields[sep+1])
	}
	return sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				sb.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// makeCgroup makes rel in every hierarchy; in cpuset's it gives the new
// cgroup its parent's CPUs and memory nodes, without which no process
// may join it.
func makeCgroup(cgroupFS, rel string) error {
	mounts, err := cgroupMounts(cgroupFS)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, rel)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("controlplane: make cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || strings.TrimSpace(string(cur)) != "" {
				continue
			}
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				return fmt.Errorf("controlplane: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("controlplane: set %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// cgroupDirs are rel and every cgroup below it in every hierarchy,
// deepest first.
func cgroupDirs(cgroupFS, rel string) []string {
	mounts, _ := cgroupMounts(cgroupFS)
	var out []string
	for _, m := range mounts {
		_ = filepath.WalkDir(filepath.Join(m, rel), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out
}

// killCgroups kills every process in the cgroups and removes them,
// retrying while killed processes are still exiting.
func killCgroups(dirs []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		left := 0
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controlplane: %d cgroups of the worker's pods are still busy", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountsUnder are the mount points at or under any of dirs, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	var out []string
	err := eachMount(func(mp, _ string) {
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				out = append(out, mp)
				return
			}
		}
	})
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out), err
}

// unmountAll detaches every mount under dirs (several times over when a
// mount point was mounted over).
func unmountAll(dirs ...string) error {
	for range 8 {
		mps, err := mountsUnder(dirs...)
		if err != nil || len(mps) == 0 {
			return err
		}
		for _, mp := range mps {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("controlplane: unmount %s: %w", mp, err)
			}
		}
	}
	mps, _ := mountsUnder(dirs...)
	if len(mps) > 0 {
		return fmt.Errorf("controlplane: still mounted: %s", strings.Join(mps, " "))
	}
	return nil
}

// shimSocketDir is where containerd 1.6's runc shims put their sockets.
const shimSocketDir = "/run/containerd/s"

// WorkerSocketRoot is where the workers' socket directories go, one per
// worker named after its id: a unix socket's path must stay short.
const WorkerSocketRoot = "/run/corral-coe"

// workerTraces locates what a worker leaves on the host: its directory,
// socket directory and id (the base name of both) tell everything.
type workerTraces struct {
	dir, socketDir, id string
	host               WorkerHost
}

func (cp *ControlPlane) traces() workerTraces {
	w := cp.worker
	return workerTraces{dir: w.Dir, socketDir: w.SocketDir, id: WorkerID(w.ClusterUUID, w.NodeName), host: w.Host}
}

func (t workerTraces) socket() string { return filepath.Join(t.socketDir, "containerd.sock") }

// taskIDs are the containerd tasks (pod sandboxes and containers) the
// worker ran and did not delete.
func (t workerTraces) taskIDs() []string {
	ents, _ := os.ReadDir(filepath.Join(t.dir, "containerd", "state", "io.containerd.runtime.v2.task", criNamespace))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// shimSockets are the shim sockets of the worker's tasks: containerd
// names them after its own address, the namespace and the task.
func (t workerTraces) shimSockets() []string {
	var out []string
	for _, id := range t.taskIDs() {
		sum := sha256.Sum256([]byte(filepath.Join(t.socket(), criNamespace, id)))
		out = append(out, filepath.Join(shimSocketDir, hex.EncodeToString(sum[:])))
	}
	return out
}

// shimProcesses are the containerd shims serving the worker's containerd.
func (t workerTraces) shimProcesses() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, uid, err := readProc(pid)
		if err == nil && uid == 0 && t.isShim(argv) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (t workerTraces) isShim(argv []string) bool {
	if !strings.HasPrefix(filepath.Base(argv[0]), "containerd-shim") {
		return false
	}
	for i, a := range argv {
		if (a == "-address" || a == "--address") && i+1 < len(argv) && argv[i+1] == t.socket() {
			return true
		}
	}
	return false
}

// containerLogLinks are the kubelet's links in /var/log/containers to the
// worker's container logs.
func (t workerTraces) containerLogLinks() []string {
	const dir = "/var/log/containers"
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, filepath.Join(t.dir, "pod-logs")+"/") {
			out = append(out, p)
		}
	}
	return out
}

// cniResults are CNI's cached results of the worker's pod network and of
// the loopback network containerd gives every sandbox.
func (t workerTraces) cniResults() []string {
	out, _ := filepath.Glob(filepath.Join(cniResultsDir, "corral-"+t.id+"-*"))
	for _, id := range t.taskIDs() {
		out = append(out, filepath.Join(cniResultsDir, "cni-loopback-"+id+"-lo"))
	}
	return out
}

// The host paths the kubelet and CNI use whatever they are told.
const (
	cniResultsDir        = "/var/lib/cni/results"
	devicePluginSocket   = "/var/lib/kubelet/device-plugins/kubelet.sock"
	kubeletProgramSuffix = "/kubelet"
)

// removeSharedKubeletState removes the device plugin socket (and the
// directories above it, when empty) once no kubelet runs on the host.
func removeSharedKubeletState() {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if argv, _, err := readProc(pid); err == nil && (argv[0] == "kubelet" || strings.HasSuffix(argv[0], kubeletProgramSuffix)) {
			return
		}
	}
	_ = os.Remove(devicePluginSocket)
	_ = os.Remove(filepath.Dir(devicePluginSocket))
	_ = os.Remove(filepath.Dir(filepath.Dir(devicePluginSocket)))
}

// CleanWorkerHost removes what the worker's pods and runtime left on the
// host once its kubelet and containerd are stopped: the pods' processes
// and cgroups, the shims, every mount under its directories, the shims'
// sockets, the log links, the pod bridge and the socket directory. It
// leaves the worker's directory for the caller to remove.
func (cp *ControlPlane) CleanWorkerHost(grace time.Duration) error {
	if cp.worker == nil {
		return fmt.Errorf("controlplane: %s is not a worker", cp.id)
	}
	return cp.traces().clean(grace)
}

// CleanWorkerLeftovers is CleanWorkerHost for a worker known only by its
// directory (named after its id, as its socket directory under
// WorkerSocketRoot is), whose processes are stopped: what tearing down a
// whole node's COE directory needs.
func CleanWorkerLeftovers(dir string, host WorkerHost, grace time.Duration) error {
	id := filepath.Base(dir)
	return workerTraces{dir: dir, socketDir: filepath.Join(WorkerSocketRoot, id), id: id, host: host}.clean(grace)
}

func (t workerTraces) clean(grace time.Duration) error {
	var errs []error
	if err := killCgroups(cgroupDirs(t.host.CgroupFS, "/corral-coe-"+t.id), grace); err != nil {
		errs = append(errs, err)
	}
	if pids := t.shimProcesses(); len(pids) > 0 {
		killStrays(pids, t.isShim, 0, grace)
	}
	if err := unmountAll(t.dir, t.socketDir); err != nil {
		errs = append(errs, err)
	}
	for _, p := range slices.Concat(t.shimSockets(), t.containerLogLinks(), t.cniResults()) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("controlplane: %w", err))
		}
	}
	// Removed only when empty: other runtimes of the host may use them.
	for _, d := range []string{shimSocketDir, filepath.Dir(shimSocketDir), cniResultsDir, filepath.Dir(cniResultsDir)} {
		_ = os.Remove(d)
	}
	removeSharedKubeletState()
	if err := deleteLink("ckb" + t.id); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(t.socketDir); err != nil {
		errs = append(errs, fmt.Errorf("controlplane: %w", err))
	}
	_ = os.Remove(filepath.Dir(t.socketDir)) // when no other worker uses it
	return errors.Join(errs...)
}

// deleteLink removes a network device; one that does not exist is gone
// already.
func deleteLink(name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	out, err := exec.Command("ip", "link", "del", "dev", name).CombinedOutput()
	if err != nil {
		if _, serr := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("controlplane: ip link del %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
