// Package bootiso makes the per-machine ISO a machine boots through virtual
// media: isolinux loading the agent ramdisk's kernel and initrd with the
// machine's own kernel command line (the Bare Metal API's URL, its
// certificate pin and the machine's kernel parameters). corral-node builds
// one for every boot it prepares; the kernel and initrd are the output of
// scripts/build-agent-ramdisk.sh.
package bootiso

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Files of an agent ramdisk directory.
const (
	KernelFile = "vmlinuz"
	InitrdFile = "initrd.img"
)

// Loader is where isolinux's files are; the zero value means Debian's
// places (packages isolinux and syslinux-common).
type Loader struct {
	ISOLinuxBin  string // isolinux.bin
	HybridMBR    string // isohdpfx.bin, so the ISO also boots as a disk
	LDLinux      string // ldlinux.c32
	XorrisoPath  string // xorriso; looked up in PATH when empty
	BuildTimeout time.Duration
}

func (l Loader) withDefaults() Loader {
	if l.ISOLinuxBin == "" {
		l.ISOLinuxBin = "/usr/lib/ISOLINUX/isolinux.bin"
	}
	if l.HybridMBR == "" {
		l.HybridMBR = "/usr/lib/ISOLINUX/isohdpfx.bin"
	}
	if l.LDLinux == "" {
		l.LDLinux = "/usr/lib/syslinux/modules/bios/ldlinux.c32"
	}
	if l.XorrisoPath == "" {
		l.XorrisoPath = "xorriso"
	}
	if l.BuildTimeout <= 0 {
		l.BuildTimeout = 2 * time.Minute
	}
	return l
}

// Check reports what is missing to build ISOs from the ramdisk directory
// dir, as an ecode.Environ error.
func (l Loader) Check(dir string) error {
	l = l.withDefaults()
	if _, err := exec.LookPath(l.XorrisoPath); err != nil {
		return ecode.Errorf(ecode.Environ, "xorriso is not installed: %w", err)
	}
	for _, f := range []string{l.ISOLinuxBin, l.HybridMBR, l.LDLinux, filepath.Join(dir, KernelFile), filepath.Join(dir, InitrdFile)} {
		st, err := os.Stat(f)
		if err != nil {
			return ecode.Errorf(ecode.Environ, "boot ISO: missing file %s: %w", f, err)
		}
		if !st.Mode().IsRegular() {
			return ecode.Errorf(ecode.Environ, "boot ISO: %s is not a regular file", f)
		}
	}
	return nil
}

// AgentCommandLine is the kernel command line of an agent boot:
// ipa-api-url=APIURL, corral.api-ca-sha256=PIN when a pin is given, then
// the machine's kernel parameters. Values that would break the line (or
// isolinux's configuration) are ecode.Inval errors.
func AgentCommandLine(apiURL, caSHA256, kernelParams string) (string, error) {
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", ecode.Errorf(ecode.Inval, "the Bare Metal API URL %q is not an http(s) URL of a host", apiURL)
	}
	if strings.ContainsAny(apiURL, " \t\r\n\"") {
		return "", ecode.Errorf(ecode.Inval, "the Bare Metal API URL %q contains a blank or a quote", apiURL)
	}
	parts := []string{"ipa-api-url=" + apiURL}
	if caSHA256 != "" {
		pin, err := hex.DecodeString(caSHA256)
		if err != nil || len(pin) != 32 {
			return "", ecode.Errorf(ecode.Inval, "api_ca_sha256 %q is not a SHA-256 in hex", caSHA256)
		}
		if u.Scheme != "https" {
			return "", ecode.Errorf(ecode.Inval, "api_ca_sha256 pins a certificate, but the Bare Metal API URL %s is not https", apiURL)
		}
		parts = append(parts, "corral.api-ca-sha256="+strings.ToLower(caSHA256))
	}
	for _, r := range kernelParams {
		if r < 0x20 || r == 0x7f {
			return "", ecode.Errorf(ecode.Inval, "kernel parameters must be one line of printable characters")
		}
	}
	if p := strings.TrimSpace(kernelParams); p != "" {
		parts = append(parts, p)
	}
	line := strings.Join(parts, " ")
	// The x86 boot protocol allows 2048 bytes, the terminating NUL included.
	if len(line) > 2047 {
		return "", ecode.Errorf(ecode.Inval, "the kernel command line is %d bytes, more than the 2047 the kernel takes", len(line))
	}
	return line, nil
}

// Build writes to iso a bootable ISO of the ramdisk in dir that boots with
// cmdline. The ISO appears complete or not at all (it is built aside and
// renamed). cmdline must be one line; use AgentCommandLine.
func (l Loader) Build(ctx context.Context, dir, iso, cmdline string) error {
	l = l.withDefaults()
	if strings.ContainsAny(cmdline, "\r\n\x00") {
		return ecode.Errorf(ecode.Inval, "the kernel command line must be one line")
	}
	if err := l.Check(dir); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(filepath.Dir(iso), ".bootiso-")
	if err != nil {
		return fmt.Errorf("boot ISO staging directory: %w", err)
	}
	defer os.RemoveAll(stage)
	loaderDir := filepath.Join(stage, "isolinux")
	if err := os.Mkdir(loaderDir, 0o700); err != nil {
		return fmt.Errorf("boot ISO staging directory: %w", err)
	}
	// xorriso's -boot-info-table writes into isolinux.bin: it gets a copy.
	if err := copyFile(l.ISOLinuxBin, filepath.Join(loaderDir, "isolinux.bin")); err != nil {
		return err
	}
	if err := copyFile(l.LDLinux, filepath.Join(loaderDir, "ldlinux.c32")); err != nil {
		return err
	}
	cfg := fmt.Sprintf("DEFAULT agent\nPROMPT 0\nTIMEOUT 0\nLABEL agent\n  KERNEL /%s\n  INITRD /%s\n  APPEND %s\n",
		KernelFile, InitrdFile, cmdline)
	if err := os.WriteFile(filepath.Join(loaderDir, "isolinux.cfg"), []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("boot ISO isolinux.cfg: %w", err)
	}
	tmp := filepath.Join(stage, "out.iso")
	ctx, cancel := context.WithTimeout(ctx, l.BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.XorrisoPath, "-as", "mkisofs", "-quiet", "-o", tmp,
		"-V", "CORRAL_AGENT", "-J", "-R",
		"-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat",
		"-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"-isohybrid-mbr", l.HybridMBR, "-graft-points",
		"/isolinux="+loaderDir,
		"/"+KernelFile+"="+filepath.Join(dir, KernelFile),
		"/"+InitrdFile+"="+filepath.Join(dir, InitrdFile))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return ecode.ExecErrorf("xorriso could not build the boot ISO: %w: %s", err, tail(out.String(), 600))
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("boot ISO: %w", err)
	}
	if err := os.Rename(tmp, iso); err != nil {
		return fmt.Errorf("boot ISO: %w", err)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("boot ISO: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("boot ISO: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("boot ISO: copying %s: %w", from, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("boot ISO: %w", err)
	}
	return nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
