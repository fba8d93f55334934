package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/seconds"
	"github.com/corral/corral/internal/uidpool"
)

// luxiHandler dispatches LUXI methods (Ganeti's names and positional
// arguments) to the queue, the configuration and the query layer.
type luxiHandler struct{ d *Daemon }

func arg[T any](args []json.RawMessage, i int, name string) (T, error) {
	var v T
	if i >= len(args) {
		return v, ecode.Errorf(ecode.Inval, "missing argument %d (%s)", i+1, name)
	}
	if err := json.Unmarshal(args[i], &v); err != nil {
		return v, ecode.Errorf(ecode.Inval, "argument %d (%s): %v", i+1, name, err)
	}
	return v, nil
}

func optArg[T any](args []json.RawMessage, i int, def T) (T, error) {
	if i >= len(args) || string(args[i]) == "null" {
		return def, nil
	}
	var v T
	if err := json.Unmarshal(args[i], &v); err != nil {
		return def, ecode.Errorf(ecode.Inval, "argument %d: %v", i+1, err)
	}
	return v, nil
}

// jobID accepts ints and the strings old clients send.
func jobID(args []json.RawMessage, i int) (int64, error) {
	v, err := arg[any](args, i, "job id")
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) {
			return int64(x), nil
		}
	case string:
		var id int64
		if _, err := fmt.Sscan(x, &id); err == nil {
			return id, nil
		}
	}
	return 0, ecode.Errorf(ecode.Inval, "invalid job id %v", v)
}

func (h *luxiHandler) Call(ctx context.Context, method string, args []json.RawMessage) (_ any, err error) {
	defer func() { h.d.metrics.luxiCall(method, err) }()
	d := h.d
	if d.term != nil {
		// A master whose term is over answers like the standby it is about
		// to become, while its last replies go out.
		if err := d.term.Err(); err != nil {
			return nil, standbyError(ctx, d.st)
		}
	}
	m, ok := luxiMethods[method]
	if !ok {
		return nil, ecode.New(ecode.LuxiError, ecode.Inval, fmt.Sprintf("Unknown LUXI method %q", method))
	}
	return m(h, ctx, args)
}

// waitForJobChange answers WaitForJobChange. Every client following a job
// calls it in a loop, so arguments in the shapes clients send (integers, a
// list of plain field names) are read without reflection; anything else
// goes through the general decoding, which also words the errors.
func (h *luxiHandler) waitForJobChange(ctx context.Context, args []json.RawMessage) (any, error) {
	id, ok := plainInt(args, 0)
	if !ok {
		var err error
		if id, err = jobID(args, 0); err != nil {
			return nil, err
		}
	}
	fields, ok := plainStrings(args, 1)
	if !ok {
		var err error
		if fields, err = arg[[]string](args, 1, "fields"); err != nil {
			return nil, err
		}
	}
	var prev []any
	var err error
	if names, ok := plainStrings(args, 2); ok {
		// The usual prev_job_info: the statuses the client last saw.
		prev = make([]any, len(names))
		for i, n := range names {
			prev[i] = n
		}
	} else if prev, err = optArg[[]any](args, 2, nil); err != nil {
		return nil, err
	}
	prevSerial, ok := plainInt(args, 3)
	if !ok {
		if prevSerial, err = optArg[int64](args, 3, -1); err != nil {
			return nil, err
		}
	}
	var tmo float64
	if n, ok := plainInt(args, 4); ok {
		tmo = float64(n)
	} else if tmo, err = optArg[float64](args, 4, 60); err != nil {
		return nil, err
	}
	tmo = min(max(tmo, 0), 89)
	info, logs, changed, err := h.d.queue.WaitForChange(ctx, id, fields, prev, prevSerial, seconds.Duration(tmo))
	if err != nil {
		return nil, err
	}
	if !changed {
		return "nochange", nil
	}
	if logs == nil {
		logs = [][]any{}
	}
	redactJobRows(h.d.engine.Ops(), fields, [][]any{info})
	reply := []any{info, logs}
	if b, err := appendJSON(make([]byte, 0, 256), reply); err == nil {
		return json.RawMessage(b), nil
	}
	return reply, nil // the server reports what cannot be encoded
}

// appendJSON appends v encoded exactly as json.Marshal encodes it. The
// values a job row and its log entries are made of are written directly,
// which is much cheaper than reflection; anything else is handed to
// json.Marshal.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case string:
		if plainString(x) {
			b = append(b, '"')
			b = append(b, x...)
			return append(b, '"'), nil
		}
	case []int64:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, n := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, n, 10)
		}
		return append(b, ']'), nil
	case []any:
		return appendList(b, x)
	case json.RawMessage:
		// json.Marshal compacts a raw message and escapes HTML in it; a
		// message with nothing to escape (the usual log message) needs
		// only the compacting, which also validates it.
		if x != nil && !bytes.ContainsAny(x, "<>&\u2028\u2029") {
			buf := bytes.NewBuffer(b)
			if err := json.Compact(buf, x); err == nil {
				return buf.Bytes(), nil
			}
		}
	case [][]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendList(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	m, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, m...), nil
}

func appendList(b []byte, l []any) ([]byte, error) {
	if l == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, e := range l {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendJSON(b, e); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// plainString reports whether json.Marshal writes s as is between quotes:
// printable ASCII that needs no escape (HTML characters are escaped).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// plainInt reads args[i] when it is a JSON integer of at most 15 digits,
// which every decoding of it (through float64 or int64) gives exactly.
func plainInt(args []json.RawMessage, i int) (int64, bool) {
	if i >= len(args) {
		return 0, false
	}
	b := []byte(args[i])
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// plainStrings reads args[i] when it is a JSON list of strings of
// printable ASCII without escapes, which decode to their bytes.
func plainStrings(args []json.RawMessage, i int) ([]string, bool) {
	if i >= len(args) {
		return nil, false
	}
	b := []byte(args[i])
	skip := func(j int) int {
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r' || b[j] == '\n') {
			j++
		}
		return j
	}
	if len(b) < 2 || b[0] != '[' {
		return nil, false
	}
	out := []string{}
	j := skip(1)
	if j < len(b) && b[j] == ']' {
		return out, skip(j+1) == len(b)
	}
	for {
		if j >= len(b) || b[j] != '"' {
			return nil, false
		}
		k := j + 1
		for k < len(b) && b[k] != '"' {
			if c := b[k]; c == '\\' || c < 0x20 || c >= 0x7f {
				return nil, false
			}
			k++
		}
		if k >= len(b) {
			return nil, false
		}
		out = append(out, string(b[j+1:k]))
		j = skip(k + 1)
		if j >= len(b) {
			return nil, false
		}
		switch b[j] {
		case ',':
			j = skip(j + 1)
		case ']':
			return out, skip(j+1) == len(b)
		default:
			return nil, false
		}
	}
}

func (d *Daemon) setWatcherPause(ctx context.Context, until *float64) (any, error) {
	c := d.cfg.Cluster()
	if until == nil {
		c.WatcherPauseUntil = 0
	} else {
		c.WatcherPauseUntil = *until
	}
	tx := d.cfg.Begin()
	tx.PutCluster(c)
	if err := d.cfg.Commit(ctx, tx); err != nil {
		return nil, err
	}
	if until == nil {
		return nil, nil
	}
	return *until, nil
}

func (d *Daemon) configValues(fields []string) ([]any, error) {
	c := d.cfg.Cluster()
	out := make([]any, len(fields))
	for i, f := range fields {
		switch f {
		case "cluster_name":
			out[i] = c.ClusterName
		case "master_node":
			if n, ok := d.cfg.Node(c.MasterNode); ok {
				out[i] = n.Name
			}
		case "drain_flag":
			out[i] = d.queue.Drained()
		case "watcher_pause":
			if c.WatcherPauseUntil > float64(time.Now().Unix()) {
				out[i] = c.WatcherPauseUntil
			}
		case "modify_ssh_setup":
			out[i] = c.SSHSetupManaged()
		case "ssh_key_type":
			out[i], _ = c.SSHKeySpec()
		case "ssh_key_bits":
			_, out[i] = c.SSHKeySpec()
		default:
			return nil, ecode.Errorf(ecode.Inval, "Unknown configuration value '%s'", f)
		}
	}
	return out, nil
}

func (d *Daemon) tags(kind, name string) ([]string, error) {
	var t []string
	switch kind {
	case "cluster":
		t = d.cfg.Cluster().Tags
	case "instance":
		i, err := d.cfg.MustInstance(name)
		if err != nil {
			return nil, err
		}
		t = i.Tags
	case "node":
		n, err := d.cfg.MustNode(name)
		if err != nil {
			return nil, err
		}
		t = n.Tags
	case "nodegroup":
		g, ok := d.cfg.Group(name)
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", name)
		}
		t = g.Tags
	case "network":
		n, err := d.cfg.MustNetwork(name)
		if err != nil {
			return nil, err
		}
		t = n.Tags
	default:
		return nil, ecode.Errorf(ecode.Inval, "Unknown tag kind '%s'", kind)
	}
	if t == nil {
		t = []string{}
	}
	return t, nil
}

func (d *Daemon) clusterInfo() map[string]any {
	c := d.cfg.Cluster()
	master := ""
	if n, ok := d.cfg.Node(c.MasterNode); ok {
		master = n.Name
	}
	osp := map[string]any{}
	for k, v := range c.OSParams {
		osp[k] = v
	}
	hvp := map[string]any{}
	for k, v := range c.HVParams {
		hvp[k] = v
	}
	tags := c.Tags
	if tags == nil {
		tags = []string{}
	}
	sshType, sshBits := c.SSHKeySpec()
	return map[string]any{
		"software_version": Version, "protocol_version": ProtocolVersion, "config_version": config.ConfigVersion,
		"os_api_version": osAPIVersion, "export_version": exportVersion, "vcs_version": "corral " + Version, "architecture": archInfo(),
		"name": c.ClusterName, "master": master, "default_hypervisor": c.DefaultHypervisor(),
		"enabled_hypervisors": c.EnabledHypervisors, "hvparams": hvp, "os_hvp": osHVP(c),
		"beparams": map[string]any{"default": c.BEParams}, "osparams": osp, "ipolicy": cmdlib.ClusterIPolicy(c),
		"nicparams": map[string]any{"default": c.NICParams}, "ndparams": cmdlib.ClusterNDParams(c), "diskparams": cmdlib.ClusterDiskParams(),
		"candidate_pool_size": c.CandidatePoolSize, "max_running_jobs": c.MaxRunningJobs, "max_tracked_jobs": c.MaxTrackedJobs,
		"job_queue_size": c.JobQueueSize, "mac_prefix": c.MACPrefix, "master_netdev": c.MasterNetdev, "master_netmask": c.MasterIPNetmask(), "master_ip": d.masterIP(), "cluster_ip": c.ClusterIP,
		"use_external_mip_script": false, "volume_group_name": nil, "drbd_usermode_helper": nil,
		"file_storage_dir": c.FileStorageDir, "shared_file_storage_dir": c.SharedFileStorageDir, "gluster_storage_dir": "",
		"maintain_node_health": false, "ctime": c.CTime, "mtime": c.MTime, "uuid": c.UUID, "tags": tags,
		"uid_pool": uidpool.FromArrays(c.UIDPool).Pairs(), "default_iallocator": c.DefaultIAllocator, "default_iallocator_params": map[string]any{},
		"reserved_lvs": []any{}, "primary_ip_version": 4, "prealloc_wipe_disks": false,
		"hidden_os": nonNil(c.HiddenOS), "blacklisted_os": nonNil(c.BlacklistedOS),
		"enabled_disk_templates": c.EnabledDiskTemplates, "install_image": "", "instance_communication_network": "",
		"zeroing_image": "", "compression_tools": []string{"gzip", "gzip-fast", "gzip-slow"},
		"enabled_user_shutdown": false, "enabled_data_collectors": map[string]any{}, "data_collector_interval": map[string]any{},
		"modify_ssh_setup": c.SSHSetupManaged(), "ssh_key_type": sshType, "ssh_key_bits": sshBits, "serial_no": c.Serial,
		"epoch": c.Epoch, "rpc_port": c.RPCPort, "vg_name": nil, "drbd_helper": nil,
		"master_capability_rapi_modifiable": c.MasterCapabilityRAPIModifiable, "auto_failover": c.AutoFailover,
	}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// backupStore writes a consistent copy of the live store into the master's
// state directory and returns its path; the (root) caller copies it where
// the operator asked and removes it.
func (d *Daemon) backupStore(ctx context.Context) (string, error) {
	dir := filepath.Join(d.opts.StateDir, "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("config-%s.db", time.Now().UTC().Format("20060102T150405.000000")))
	if err := d.st.Backup(ctx, path); err != nil {
		return "", err
	}
	return path, nil
}

// redactJobRows hides secret opcode parameters (Ganeti's osparams_secret)
// in the "ops" field of job query answers: every LUXI caller may write,
// so private ones stay visible (corral-rapi hides those from its readers).
// A running op's record keeps its secrets, since the op needs them when it
// runs or resumes; the record of an op that ended has lost them already.
func redactJobRows(tab *opcodes.Table, fields []string, rows [][]any) {
	tab.RedactJobRows(fields, rows, opcodes.Secret)
}

// osHVP is the cluster's os_hvp, an empty dict when there are none.
func osHVP(c *config.Cluster) any {
	if len(c.OSHVParams) == 0 {
		return map[string]any{}
	}
	return c.OSHVParams
}
