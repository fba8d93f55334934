package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// coeHead is `corral coe`: Kubernetes clusters as a service, with the
// objects and verbs of `openstack coe`, over LUXI.
func coeHead() *cobra.Command {
	coe := newGroup("coe", "Manage Kubernetes clusters: templates, clusters, node groups, CAs, quotas (as openstack coe)",
		"  corral coe template create small --coe kubernetes --image kwok --cluster-distro fake\n"+
			"  corral coe cluster create k1 --template small --node-count 3 --wait\n"+
			"  corral coe cluster config k1 --dir ~/.kube/k1",
	)
	coe.Long = `Kubernetes clusters as a service, after OpenStack Magnum ("COE" is Magnum's
container orchestration engine). A cluster template says what to build (driver,
image, flavors, labels); a COE cluster is one Kubernetes cluster made from a
template, with a default master and a default worker node group, and more node
groups on request. The objects, their fields and statuses are those of
"openstack coe" against corral-rapi's Container Infra API.

This command talks to corrald directly and acts as an administrator: it sees
and changes the objects of every project. Objects it creates belong to no
project unless --project names one (quotas count a project's clusters).

Every change is a job of an OP_COE_* opcode. A command returns once the change
is under way (the cluster shows its *_IN_PROGRESS status); with --wait it
follows the job to its end, printing each step as the cluster's conditions
record it, and fails when the job does.`
	return coe
}

// addCOECommands completes the coe section.
func (a *app) addCOECommands(coe *cobra.Command) {
	tpl := newGroup("template", "Create, list, change and remove cluster templates",
		"  corral coe template list\n  corral coe template show small", "clustertemplate")
	tpl.AddCommand(a.coeTemplateCreateCmd(), a.coeTemplateListCmd(), a.coeTemplateShowCmd(),
		a.coeTemplateUpdateCmd(), a.coeTemplateDeleteCmd())
	cl := newGroup("cluster", "Create, inspect, resize, upgrade and remove Kubernetes clusters",
		"  corral coe cluster list\n  corral coe cluster show k1\n  corral coe cluster resize k1 5 --wait")
	cl.AddCommand(a.coeClusterCreateCmd(), a.coeClusterListCmd(), a.coeClusterShowCmd(), a.coeClusterUpdateCmd(),
		a.coeClusterResizeCmd(), a.coeClusterUpgradeCmd(), a.coeClusterDeleteCmd(), a.coeClusterConfigCmd())
	ng := newGroup("nodegroup", "Add, list, change and remove a cluster's node groups",
		"  corral coe nodegroup list k1\n  corral coe nodegroup create k1 big --node-count 2 --flavor large")
	ng.AddCommand(a.coeNodeGroupCreateCmd(), a.coeNodeGroupListCmd(), a.coeNodeGroupShowCmd(),
		a.coeNodeGroupUpdateCmd(), a.coeNodeGroupDeleteCmd())
	ca := newGroup("ca", "Show a cluster's CA, sign certificate requests with it, rotate it",
		"  corral coe ca show k1\n  corral coe ca sign k1 user.csr")
	ca.AddCommand(a.coeCAShowCmd(), a.coeCASignCmd(), a.coeCARotateCmd())
	quota := newGroup("quota", "Set, list and remove projects' cluster quotas",
		"  corral coe quota set --project-id team1 --hard-limit 5\n  corral coe quota list", "quotas")
	quota.AddCommand(a.coeQuotaSetCmd(), a.coeQuotaListCmd(), a.coeQuotaShowCmd(), a.coeQuotaDeleteCmd())
	svc := newGroup("service", "List the processes acting for the Kubernetes clusters", "  corral coe service list")
	svc.AddCommand(a.coeServiceListCmd())
	coe.AddCommand(tpl, cl, ng, ca, quota, svc)
	a.addCOEFederationCommands(coe)
}

// coeTemplates asks corrald for templates by name or uuid, all when none.
func coeTemplates(ctx context.Context, c *luxi.Client, names []string) ([]*config.COETemplate, error) {
	var out []*config.COETemplate
	if names == nil {
		names = []string{}
	}
	err := c.Call(ctx, coewire.MethodTemplates, []any{names}, &out)
	return out, err
}

func coeTemplate(ctx context.Context, c *luxi.Client, name string) (*config.COETemplate, error) {
	ts, err := coeTemplates(ctx, c, []string{name})
	if err != nil {
		return nil, err
	}
	if len(ts) != 1 {
		return nil, fmt.Errorf("template %s: corrald answered %d templates", name, len(ts))
	}
	return ts[0], nil
}

// coeClusters asks corrald for clusters (with their node groups and
// conditions) by name or uuid, all when none.
func coeClusters(ctx context.Context, c *luxi.Client, names []string) ([]coewire.ClusterRecord, error) {
	var out []coewire.ClusterRecord
	if names == nil {
		names = []string{}
	}
	err := c.Call(ctx, coewire.MethodClusters, []any{names}, &out)
	return out, err
}

func coeCluster(ctx context.Context, c *luxi.Client, name string) (coewire.ClusterRecord, error) {
	rs, err := coeClusters(ctx, c, []string{name})
	if err != nil {
		return coewire.ClusterRecord{}, err
	}
	if len(rs) != 1 || rs[0].Cluster == nil {
		return coewire.ClusterRecord{}, fmt.Errorf("cluster %s: corrald answered %d clusters", name, len(rs))
	}
	return rs[0], nil
}

// coeSubmit submits one OP_COE_* opcode; corrald answers once the change
// is under way, or with the opcode's error.
func coeSubmit(ctx context.Context, c *luxi.Client, op map[string]any) (int64, error) {
	var r coewire.SubmitReply
	err := c.Call(ctx, coewire.MethodSubmit, []any{op}, &r)
	return r.JobID, err
}

// coeHidden are stored fields that are nobody's business at the
// command line: the driver's opaque placement and the sealed CA key.
var coeHidden = []string{"placement", "private_key_sealed", "nodes"}

// coeDoc renders a stored COE object as the API shows it, with the driver
// and trust an administrator may want: unset fields (null, "") left out,
// ctime and mtime as created_at and updated_at.
func coeDoc(obj any) map[string]any {
	raw, _ := json.Marshal(obj)
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	for _, k := range coeHidden {
		delete(doc, k)
	}
	ct, _ := doc["ctime"].(float64)
	mt, _ := doc["mtime"].(float64)
	delete(doc, "ctime")
	delete(doc, "mtime")
	delete(doc, "serial_no")
	for k, v := range doc {
		if v == nil || v == "" {
			delete(doc, k)
		}
	}
	if ct > 0 {
		doc["created_at"] = isoUTC(ct)
	}
	if mt > 0 && mt != ct {
		doc["updated_at"] = isoUTC(mt)
	}
	return doc
}

// isoUTC is Magnum's time format.
func isoUTC(t float64) string {
	sec := int64(t)
	return time.Unix(sec, int64((t-float64(sec))*1e9)).UTC().Format("2006-01-02T15:04:05+00:00")
}

// clusterDoc is a cluster with the counts of its default groups, as the
// API derives them.
func clusterDoc(r coewire.ClusterRecord) map[string]any {
	doc := coeDoc(r.Cluster)
	doc["node_count"], doc["master_count"] = 0, 0
	for _, g := range r.NodeGroups {
		if !g.IsDefault {
			continue
		}
		switch g.Role {
		case config.COERoleMaster:
			doc["master_count"] = g.NodeCount
		case config.COERoleWorker:
			doc["node_count"] = g.NodeCount
		}
	}
	if doc["labels"] == nil {
		doc["labels"] = map[string]any{}
	}
	return jsonRound(doc)
}

// nodeGroupDoc is a node group with its Kubernetes nodes.
func nodeGroupDoc(g *config.COENodeGroup) map[string]any {
	doc := coeDoc(g)
	nodes := make([]any, len(g.Nodes))
	for i, n := range g.Nodes {
		nodes[i] = n
	}
	doc["nodes"] = nodes
	return jsonRound(doc)
}

// jsonRound gives a document the shapes values have after a JSON round
// trip (numbers float64, lists []any), as the table printer expects.
func jsonRound(doc map[string]any) map[string]any {
	raw, _ := json.Marshal(doc)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// coeField is how the coe lists title and align a field: the API's field
// names, as the openstack client's columns.
func coeField(name string) fieldDef {
	switch name {
	case "public", "hidden", "tls_disabled", "is_default", "registry_enabled", "master_lb_enabled", "floating_ip_enabled", "up":
		return fieldDef{name, kindBool}
	case "node_count", "master_count", "min_node_count", "max_node_count", "hard_limit", "create_timeout", "docker_volume_size", "apiserver_port", "id":
		return fieldDef{name, kindNumber}
	case "labels", "member_ids", "properties", "nodes", "node_addresses", "master_addresses", "health_status_reason", "faults":
		return fieldDef{name, kindOther}
	}
	return fieldDef{name, kindText}
}

// writeCOEObjects prints documents as a table of fields, or as JSON.
func (a *app) writeCOEObjects(w io.Writer, o *bmOutput, defaults []string, objs []map[string]any) error {
	return a.writeAPIObjects(w, o, coeField, defaults, objs)
}

// addShowOutput is the -o of the show commands: only json.
func addShowOutput(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "", `"json" prints the object as JSON`)
}

func checkShowOutput(output string) error {
	if output != "" && output != "json" {
		return paramErr("-o %q: only json is known", output)
	}
	return nil
}

// parseLabels reads --labels values as the openstack client does:
// KEY=VALUE pairs separated by commas, the flag repeatable; a piece with
// no "=" continues the previous value (a value with commas).
func parseLabels(vals []string) (map[string]any, error) {
	out := map[string]any{}
	for _, v := range vals {
		last := ""
		for _, piece := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(piece, "=")
			switch {
			case ok && strings.TrimSpace(k) != "":
				last = strings.TrimSpace(k)
				out[last] = val
			case last != "":
				out[last] = out[last].(string) + "," + piece
			default:
				return nil, paramErr("--labels %q: want KEY=VALUE[,KEY=VALUE...]", v)
			}
		}
	}
	return out, nil
}

// coeWaitOpts is --wait [SECONDS] of the commands that start cluster work.
type coeWaitOpts struct{ secs int }

func addCOEWaitFlag(cmd *cobra.Command, w *coeWaitOpts) {
	cmd.Flags().IntVar(&w.secs, "wait", -1, "follow the job to its end, printing each step; --wait=SECONDS gives up after SECONDS (the job goes on)")
	cmd.Flags().Lookup("wait").NoOptDefVal = "0"
}

func (w *coeWaitOpts) on() bool { return w.secs >= 0 }

// coePoll is how often --wait looks at the job and the cluster.
const coePoll = 500 * time.Millisecond

// coeFollow follows job id, which works on cluster (name or uuid), until
// it ends: every change of the cluster's status, of its node groups'
// statuses and of its step conditions is printed once. A job that fails
// is the command's failure; so is the time limit (secs > 0).
func (a *app) coeFollow(ctx context.Context, c *luxi.Client, out io.Writer, id int64, cluster string, secs int) error {
	var deadline time.Time
	if secs > 0 {
		deadline = a.env.now().Add(time.Duration(secs) * time.Second)
	}
	poll := a.env.coePoll
	if poll == 0 {
		poll = coePoll
	}
	w := newCOEWatch(cluster)
	// Conditions there before this job are not its progress.
	if rec, err := coeCluster(ctx, c, cluster); err == nil {
		w.seed(rec)
	}
	for {
		rows, err := c.QueryJobs(ctx, []int64{id}, []string{"status"})
		if err != nil {
			return err
		}
		done := true
		if len(rows) == 1 && rows[0] != nil && len(rows[0]) == 1 {
			st, _ := rows[0][0].(string)
			done = st == "success" || st == "error" || st == "canceled"
		}
		rec, err := coeCluster(ctx, c, cluster)
		switch {
		case err == nil:
			w.observe(rec, out)
		case ecode.ClassOf(err) == ecode.NoEnt:
			w.gone(out)
		default:
			return err
		}
		if done {
			_, _, err := luxi.WaitForJob(ctx, c, id, nil)
			return err
		}
		if !deadline.IsZero() && !a.env.now().Before(deadline) {
			return ecode.Errorf(ecode.State, "Timeout reached after %d seconds while following job %d on cluster %s; it goes on running: corral job watch %d", secs, id, cluster, id)
		}
		select {
		case <-ctx.Done():
			return &interruptedError{job: id}
		case <-time.After(poll):
		}
	}
}

// coeWatch is what --wait has printed of a cluster.
type coeWatch struct {
	name    string
	status  string
	groups  map[string]string
	conds   map[string]config.Condition
	goneYet bool
}

func newCOEWatch(name string) *coeWatch {
	return &coeWatch{name: name, groups: map[string]string{}, conds: map[string]config.Condition{}}
}

// seed takes the cluster's name, its groups' statuses and its conditions
// as they were before the job.
func (w *coeWatch) seed(rec coewire.ClusterRecord) {
	w.name = rec.Cluster.Name
	for _, g := range rec.NodeGroups {
		w.groups[g.UUID] = g.Status
	}
	if rec.Status != nil {
		for _, cd := range rec.Status.Conditions {
			w.conds[cd.Type] = cd
		}
	}
}

// observe prints what changed since the last look: a status under way
// first, then the steps' conditions in the order they changed, the node
// groups, and a final status last.
func (w *coeWatch) observe(rec coewire.ClusterRecord, out io.Writer) {
	c := rec.Cluster
	status := ""
	if c.Status != w.status {
		status = fmt.Sprintf("%s: %s", w.name, c.Status)
		if c.StatusReason != "" {
			status += ": " + c.StatusReason
		}
		w.status = c.Status
	}
	if strings.HasSuffix(c.Status, "_IN_PROGRESS") && status != "" {
		fmt.Fprintln(out, status)
		status = ""
	}
	var conds []config.Condition
	if rec.Status != nil {
		conds = slices.Clone(rec.Status.Conditions)
	}
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].Time < conds[j].Time })
	for _, cd := range conds {
		if old, ok := w.conds[cd.Type]; ok && old == cd {
			continue
		}
		w.conds[cd.Type] = cd
		fmt.Fprintf(out, "%s:   %s\n", w.name, conditionLine(cd))
	}
	for _, g := range rec.NodeGroups {
		if w.groups[g.UUID] != g.Status {
			w.groups[g.UUID] = g.Status
			line := fmt.Sprintf("%s:   node group %s: %s (%d nodes)", w.name, g.Name, g.Status, len(g.Nodes))
			if g.StatusReason != "" {
				line += ": " + g.StatusReason
			}
			fmt.Fprintln(out, line)
		}
	}
	if status != "" {
		fmt.Fprintln(out, status)
	}
}

func (w *coeWatch) gone(out io.Writer) {
	if !w.goneYet {
		fmt.Fprintf(out, "%s: deleted\n", w.name)
		w.goneYet = true
	}
}

// conditionLine is one step condition: "ControlPlaneReady True (Done) start the control plane".
func conditionLine(cd config.Condition) string {
	s := cd.Type + " " + cd.Status
	if cd.Reason != "" {
		s += " (" + cd.Reason + ")"
	}
	if cd.Message != "" {
		s += " " + cd.Message
	}
	return s
}

// typedValue reads VALUE of a NAME=VALUE change for a field of kind:
// booleans, integers, labels (KEY=VALUE,...) or strings; "null" unsets.
func typedValue(name, val string, kind fieldKind) (any, error) {
	if val == "null" {
		return nil, nil
	}
	switch kind {
	case kindBool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return nil, paramErr("%s=%s: want true or false", name, val)
		}
		return b, nil
	case kindNumber:
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return nil, paramErr("%s=%s: want a non-negative integer", name, val)
		}
		return n, nil
	case kindOther:
		return parseLabels([]string{val})
	}
	return val, nil
}

// parseChanges reads NAME=VALUE arguments (after an optional "replace" or
// "add", the openstack client's JSON-patch words) into typed changes;
// "remove NAME..." unsets names. allowed says which names may change.
func parseChanges(args []string, allowed []string) (map[string]any, error) {
	if len(args) == 0 {
		return nil, usagef("nothing to change: give at least one NAME=VALUE")
	}
	remove := false
	switch args[0] {
	case "replace", "add":
		args = args[1:]
	case "remove":
		remove, args = true, args[1:]
	}
	if len(args) == 0 {
		return nil, usagef("nothing to change: give at least one NAME=VALUE")
	}
	out := map[string]any{}
	for _, a := range args {
		name, val, ok := strings.Cut(a, "=")
		if remove {
			name, val, ok = a, "null", true
		}
		if !ok || name == "" {
			return nil, paramErr("%q: want NAME=VALUE", a)
		}
		if !slices.Contains(allowed, name) {
			return nil, paramErr("%s cannot be changed; these can: %s", name, strings.Join(allowed, ", "))
		}
		v, err := typedValue(name, val, coeField(name).kind)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}
