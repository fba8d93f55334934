package cmdlib

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// supportedDiskTemplates are the disk templates Corral's nodes can hold.
var supportedDiskTemplates = []string{config.DTDiskless, config.DTFile, config.DTSharedFile, config.DTRBD}

func diskTemplateSupported(t string) bool { return slices.Contains(supportedDiskTemplates, t) }

// checkTemplateDiskParams refuses disk parameters no node could use: rbd
// only through librbd, with absolute conf and keyring paths (they go into
// qemu's option string, where ':' separates options).
func checkTemplateDiskParams(tmpl string, p config.Params) error {
	if tmpl != config.DTRBD {
		return nil
	}
	if a, ok := p["access"].(string); ok && a != "userspace" {
		return ecode.Errorf(ecode.Inval, "rbd access '%s' is not supported: Corral reaches Ceph through librbd only (userspace)", a)
	}
	if pool, ok := p["pool"].(string); ok && (pool == "" || strings.ContainsAny(pool, "/@:")) {
		return ecode.Errorf(ecode.Inval, "invalid rbd pool '%s'", pool)
	}
	for _, k := range []string{"conf", "keyring"} {
		if v, ok := p[k].(string); ok && (!filepath.IsAbs(v) || strings.Contains(v, ":")) {
			return ecode.Errorf(ecode.Inval, "rbd %s must be an absolute path without ':', got '%s'", k, v)
		}
	}
	return nil
}

// nodeDiskParams are a disk template's effective disk parameters in the
// group of the node, as text for the node daemon (nil for templates that
// have none, such as file). rbd's pool, access, conf and keyring travel
// this way: the keyring is a path, its key never leaves the node.
func (p *Processor) nodeDiskParams(tmpl, nodeUUID string) map[string]string {
	var custom map[string]config.Params
	if n, ok := p.Cfg.Node(nodeUUID); ok {
		if g, ok := p.Cfg.Group(n.Group); ok {
			custom = g.DiskParams
		}
	}
	ps := GroupDiskParams(custom)[tmpl]
	if len(ps) == 0 {
		return nil
	}
	return ps.Strings()
}
