package storage

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Disk parameters of the rbd template (Ganeti's pool and access, plus
// where the node finds the Ceph cluster's configuration and key).
const (
	RBDParamPool    = "pool"
	RBDParamAccess  = "access"
	RBDParamConf    = "conf"
	RBDParamKeyring = "keyring"

	RBDAccessUserspace = "userspace"
	RBDAccessKernel    = "kernelspace"

	// Ceph's own defaults, used when a parameter is unset.
	RBDDefaultPool    = "rbd"
	RBDDefaultConf    = "/etc/ceph/ceph.conf"
	RBDDefaultKeyring = "/etc/ceph/ceph.client.admin.keyring"
)

// rbdImageSuffix ends every image Corral makes: <instance uuid>.<disk>.rbd.
const rbdImageSuffix = ".rbd"

// RBDLocation is where a disk's image lives and how to reach it: the
// cluster's ceph.conf, a keyring with the client's key and that client's
// name. The keyring's content is a secret: only its path travels.
type RBDLocation struct {
	Pool    string
	Image   string
	Conf    string
	Keyring string
	Client  string // the cephx user without "client.", e.g. "admin"
}

// Spec is "POOL/IMAGE", the image's name for the rbd tool.
func (l RBDLocation) Spec() string { return l.Pool + "/" + l.Image }

// RBD is the "rbd" template: each disk is a Ceph RBD image, reached only in
// user space through librbd (Ganeti's access=userspace): the rbd and
// qemu-img tools here, qemu's rbd driver for the guest. No kernel mapping,
// so no block device exists on the node.
type RBD struct {
	rbdTool string // "rbd", or a path
}

// NewRBD returns the rbd backend.
func NewRBD() *RBD { return &RBD{rbdTool: "rbd"} }

// Template implements Backend.
func (r *RBD) Template() string { return TemplateRBD }

// Location resolves a disk's image from its disk parameters.
func (r *RBD) Location(instUUID string, d Disk) (RBDLocation, error) {
	if !validComponent(instUUID) || strings.ContainsAny(instUUID, "@.") {
		return RBDLocation{}, ecode.Errorf(ecode.Inval, "invalid instance uuid '%s'", instUUID)
	}
	name := d.UUID
	if name == "" {
		if d.Index < 0 {
			return RBDLocation{}, ecode.Errorf(ecode.Inval, "invalid disk index %d", d.Index)
		}
		name = "disk" + strconv.Itoa(d.Index)
	} else if !validComponent(name) || strings.ContainsAny(name, "@.") {
		return RBDLocation{}, ecode.Errorf(ecode.Inval, "invalid disk uuid '%s'", name)
	}
	p := d.Params
	if a := p[RBDParamAccess]; a != "" && a != RBDAccessUserspace {
		return RBDLocation{}, ecode.Errorf(ecode.Inval,
			"rbd access '%s' is not supported: Corral reaches Ceph through librbd only (set the rbd disk parameter access=userspace)", a)
	}
	l := RBDLocation{Pool: paramOr(p, RBDParamPool, RBDDefaultPool), Image: instUUID + "." + name + rbdImageSuffix,
		Conf: paramOr(p, RBDParamConf, RBDDefaultConf), Keyring: paramOr(p, RBDParamKeyring, RBDDefaultKeyring)}
	if l.Pool == "" || strings.ContainsAny(l.Pool, "/@:\x00") {
		return RBDLocation{}, ecode.Errorf(ecode.Inval, "invalid rbd pool '%s'", l.Pool)
	}
	for _, f := range []string{l.Conf, l.Keyring} {
		if !filepath.IsAbs(f) || strings.ContainsAny(f, ":\x00") {
			return RBDLocation{}, ecode.Errorf(ecode.Inval, "rbd conf and keyring must be absolute paths without ':', got '%s'", f)
		}
	}
	client, err := KeyringClient(l.Keyring)
	if err != nil {
		return RBDLocation{}, err
	}
	l.Client = client
	return l, nil
}

func paramOr(p map[string]string, k, def string) string {
	if v := p[k]; v != "" {
		return v
	}
	return def
}

// KeyringClient is the first client's name in a keyring ("admin" for a
// [client.admin] section). Only section headers are looked at; the key is
// neither kept nor reported.
func KeyringClient(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", ecode.Errorf(ecode.Environ, "cannot read the ceph keyring %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, ok := keyringSection(sc.Text()); ok && strings.HasPrefix(name, "client.") && len(name) > len("client.") {
			return strings.TrimPrefix(name, "client."), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", ecode.Errorf(ecode.Environ, "reading the ceph keyring %s: %w", path, err)
	}
	return "", ecode.Errorf(ecode.Environ, "the ceph keyring %s holds no [client.NAME] section", path)
}

func keyringSection(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if len(line) < 3 || line[0] != '[' || line[len(line)-1] != ']' {
		return "", false
	}
	name := strings.TrimSpace(line[1 : len(line)-1])
	if name == "" || strings.ContainsAny(name, ":/\x00 ") {
		return "", false
	}
	return name, true
}

// ClientKeyring is the keyring text with only client's section: what a
// confined qemu gets, rather than every key the node's keyring may hold.
func ClientKeyring(path, client string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "cannot read the ceph keyring %s: %w", path, err)
	}
	var out bytes.Buffer
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := keyringSection(line); ok {
			in = name == "client."+client
		}
		if in {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	if out.Len() == 0 {
		return nil, ecode.Errorf(ecode.Environ, "the ceph keyring %s has no section for client.%s", path, client)
	}
	return out.Bytes(), nil
}

// rbd runs the rbd tool against l's cluster. Its standard error goes into
// the error (it never carries the key).
func (r *RBD) rbd(ctx context.Context, l RBDLocation, stdin io.Reader, stdout io.Writer, args ...string) error {
	argv := append([]string{"--conf", l.Conf, "--keyring", l.Keyring, "--id", l.Client}, args...)
	cmd := exec.CommandContext(ctx, r.rbdTool, argv...)
	var errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 1000 {
			msg = msg[len(msg)-1000:]
		}
		return &rbdError{args: strings.Join(args, " "), err: err, msg: msg}
	}
	return nil
}

// rbdError is a failed rbd command; the tool exits with the errno.
type rbdError struct {
	args string
	err  error
	msg  string
}

func (e *rbdError) Error() string { return fmt.Sprintf("rbd %s: %v: %s", e.args, e.err, e.msg) }
func (e *rbdError) Unwrap() error { return e.err }

func (e *rbdError) errno() syscall.Errno {
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		return syscall.Errno(ee.ExitCode())
	}
	return 0
}

func isErrno(err error, n syscall.Errno) bool {
	var re *rbdError
	return errors.As(err, &re) && re.errno() == n
}

// imageSize is the image's size in bytes; ok is false when it does not exist.
func (r *RBD) imageSize(ctx context.Context, l RBDLocation, image string) (size int64, ok bool, err error) {
	var out bytes.Buffer
	err = r.rbd(ctx, l, nil, &out, "info", "--format", "json", l.Pool+"/"+image)
	if isErrno(err, syscall.ENOENT) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, ecode.ExecErrorf("%w", err)
	}
	var info struct {
		Size int64 `json:"size"`
	}
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return 0, false, ecode.ExecErrorf("rbd info %s: %w", l.Spec(), err)
	}
	return info.Size, true, nil
}

// Path implements Backend: "rbd:POOL/IMAGE", a name for operators (there
// is no file on the node); "" when the disk's parameters are unusable.
func (r *RBD) Path(instUUID string, d Disk) string {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return ""
	}
	return "rbd:" + l.Spec()
}

// Create implements Backend. The owner is not used: the guest's qemu
// reaches the image through Ceph, with its own copy of the key.
func (r *RBD) Create(ctx context.Context, instUUID string, d Disk, _ Owner) (string, error) {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return "", err
	}
	if err := checkSize(d.SizeMiB); err != nil {
		return "", err
	}
	if err := r.createImage(ctx, l, d.SizeMiB); err != nil {
		return "", err
	}
	return "rbd:" + l.Spec(), nil
}

// createImage is idempotent: an image of the same size is success.
func (r *RBD) createImage(ctx context.Context, l RBDLocation, sizeMiB int64) error {
	err := r.rbd(ctx, l, nil, nil, "create", "--size", strconv.FormatInt(sizeMiB, 10)+"M", l.Spec())
	if err == nil {
		return nil
	}
	if !isErrno(err, syscall.EEXIST) {
		return ecode.ExecErrorf("creating rbd image %s: %w", l.Spec(), err)
	}
	size, ok, serr := r.imageSize(ctx, l, l.Image)
	if serr != nil {
		return serr
	}
	if ok && size != sizeMiB*mib {
		return ecode.Errorf(ecode.Exists, "rbd image %s already exists with a size of %d bytes, not %d MiB", l.Spec(), size, sizeMiB)
	}
	return nil
}

// Remove implements Backend; a missing image is success.
func (r *RBD) Remove(ctx context.Context, instUUID string, d Disk) error {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return err
	}
	return r.removeImage(ctx, l, l.Image)
}

// rbdWatchExpiry is how long a client that died with an image open keeps
// it busy: the OSDs drop its watch after osd_client_watch_timeout (30 s by
// default), plus room for a loaded cluster.
const rbdWatchExpiry = 40 * time.Second

func (r *RBD) removeImage(ctx context.Context, l RBDLocation, image string) error {
	deadline := time.Now().Add(rbdWatchExpiry)
	for {
		err := r.rbd(ctx, l, nil, nil, "rm", "--no-progress", l.Pool+"/"+image)
		if !isErrno(err, syscall.EBUSY) || time.Now().After(deadline) {
			return removeImageResult(l, image, err)
		}
		// A qemu that was killed leaves its watch until it expires.
		select {
		case <-ctx.Done():
			return removeImageResult(l, image, err)
		case <-time.After(2 * time.Second):
		}
	}
}

func removeImageResult(l RBDLocation, image string, err error) error {
	if err == nil || isErrno(err, syscall.ENOENT) {
		return nil
	}
	if isErrno(err, syscall.EBUSY) {
		return ecode.Errorf(ecode.State, "rbd image %s/%s is still open (by a running qemu?): %w", l.Pool, image, err)
	}
	return ecode.ExecErrorf("removing rbd image %s/%s: %w", l.Pool, image, err)
}

// Grow implements Backend.
func (r *RBD) Grow(ctx context.Context, instUUID string, d Disk, newSizeMiB int64) error {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return err
	}
	if err := checkSize(newSizeMiB); err != nil {
		return err
	}
	size, ok, err := r.imageSize(ctx, l, l.Image)
	if err != nil {
		return err
	}
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "rbd image %s not found", l.Spec())
	}
	switch newSize := newSizeMiB * mib; {
	case newSize == size:
		return nil
	case newSize < size:
		return ecode.Errorf(ecode.Inval, "cannot shrink rbd image %s from %d bytes to %d MiB", l.Spec(), size, newSizeMiB)
	}
	if err := r.rbd(ctx, l, nil, nil, "resize", "--no-progress", "--size", strconv.FormatInt(newSizeMiB, 10)+"M", l.Spec()); err != nil {
		return ecode.ExecErrorf("growing rbd image %s: %w", l.Spec(), err)
	}
	return nil
}

// Exists reports whether the disk's image is in the pool, and its size.
func (r *RBD) Exists(ctx context.Context, instUUID string, d Disk) (sizeBytes int64, ok bool, err error) {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return 0, false, err
	}
	return r.imageSize(ctx, l, l.Image)
}

// Import replaces the disk's image with the raw image in the file src
// (zero ranges are not written, so a sparse file stays sparse in Ceph).
// The bytes go to a temporary image renamed into place once complete: the
// disk is never seen half written, and a failed import leaves the old one.
func (r *RBD) Import(ctx context.Context, instUUID string, d Disk, src string) error {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return err
	}
	tmp := l.Image + ".import"
	if err := r.removeImage(ctx, l, tmp); err != nil { // left by an interrupted import
		return err
	}
	if err := r.rbd(ctx, l, nil, nil, "import", "--no-progress", "--image-format", "2", src, l.Pool+"/"+tmp); err != nil {
		_ = r.removeImage(context.WithoutCancel(ctx), l, tmp)
		return ecode.ExecErrorf("importing into rbd image %s: %w", l.Spec(), err)
	}
	// The old image steps aside before the new one takes its name, so the
	// disk is missing only between two renames, and kept if the second fails.
	old := l.Image + ".replaced"
	if err := r.removeImage(ctx, l, old); err != nil {
		return err
	}
	err = r.Rename(ctx, l, l.Image, old)
	if err != nil && !isErrno(err, syscall.ENOENT) {
		_ = r.removeImage(context.WithoutCancel(ctx), l, tmp)
		return err
	}
	if err := r.Rename(ctx, l, tmp, l.Image); err != nil {
		return err
	}
	return r.removeImage(ctx, l, old)
}

// Rename gives an image of l's pool a new name.
func (r *RBD) Rename(ctx context.Context, l RBDLocation, from, to string) error {
	if err := r.rbd(ctx, l, nil, nil, "rename", l.Pool+"/"+from, l.Pool+"/"+to); err != nil {
		if isErrno(err, syscall.ENOENT) {
			return err // the caller decides whether a missing image matters
		}
		return ecode.ExecErrorf("renaming rbd image %s/%s to %s: %w", l.Pool, from, to, err)
	}
	return nil
}

// Export writes the disk's bytes into the file dst as a raw image (sparse
// where the image is unallocated); dst must not exist.
func (r *RBD) Export(ctx context.Context, instUUID string, d Disk, dst string) error {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return err
	}
	if err := r.rbd(ctx, l, nil, nil, "export", "--no-progress", l.Spec(), dst); err != nil {
		if isErrno(err, syscall.ENOENT) {
			return ecode.Errorf(ecode.NoEnt, "rbd image %s not found", l.Spec())
		}
		return ecode.ExecErrorf("exporting rbd image %s: %w", l.Spec(), err)
	}
	return nil
}

// ExportTo streams the disk's bytes to w.
func (r *RBD) ExportTo(ctx context.Context, instUUID string, d Disk, w io.Writer) error {
	l, err := r.Location(instUUID, d)
	if err != nil {
		return err
	}
	if err := r.rbd(ctx, l, nil, w, "export", "--no-progress", l.Spec(), "-"); err != nil {
		return ecode.ExecErrorf("exporting rbd image %s: %w", l.Spec(), err)
	}
	return nil
}

// Free implements Backend. The capacity is the Ceph cluster's, not the
// node's, and depends on the pool a group's parameters name: it is not a
// node figure, so the node reports none.
func (r *RBD) Free(context.Context) (int64, int64, error) { return 0, 0, nil }

// List implements Backend: images live in the Ceph cluster, shared by all
// nodes, so no node holds any of its own.
func (r *RBD) List(context.Context) ([]FoundDisk, error) { return nil, nil }
