package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/luxi"
)

// coeClusterDefaults are a cluster list's columns, as `openstack coe
// cluster list`.
var coeClusterDefaults = []string{"uuid", "name", "keypair", "node_count", "master_count", "status", "health_status"}

// coeAction submits op for cluster and reports it accepted; with --wait
// it follows the job to its end.
func (a *app) coeAction(ctx context.Context, c *luxi.Client, out io.Writer, op map[string]any, cluster, what string, w coeWaitOpts) error {
	return a.coeSubmitFollow(ctx, c, out, op, cluster, w, func(id int64) string {
		return fmt.Sprintf("Request to %s cluster %s has been accepted (job %d).", what, cluster, id)
	})
}

// coeSubmitFollow submits op, prints the line accepted makes of its job
// id and, with --wait, follows the job on cluster to its end.
func (a *app) coeSubmitFollow(ctx context.Context, c *luxi.Client, out io.Writer, op map[string]any, cluster string, w coeWaitOpts, accepted func(id int64) string) error {
	id, err := coeSubmit(ctx, c, op)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, accepted(id))
	if !w.on() {
		return nil
	}
	return a.coeFollow(ctx, c, out, id, cluster, w.secs)
}

func (a *app) coeClusterCreateCmd() *cobra.Command {
	var tpl, uuid, project, keypair, flavor, masterFlavor, fixedNet, fixedSubnet, discovery string
	var nodes, masters, timeout, volume int
	var labels []string
	var merge, fip, noFIP, lb, noLB bool
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:   "create NAME --template TEMPLATE [--node-count N] [--master-count M] [--wait[=SECONDS]]",
		Short: "Create a Kubernetes cluster from a template",
		Long: `Create a cluster: the command returns once the cluster is stored with status
CREATE_IN_PROGRESS; with --wait it follows the creation job, printing each
step (certificates, API endpoint, etcd, control plane, node groups, health) as
the cluster's conditions record it, until CREATE_COMPLETE or CREATE_FAILED
with its reason.

Labels replace the template's unless --merge-labels is given.`,
		Example: "  corral coe cluster create k1 --template small --node-count 3 --wait\n" +
			"  corral coe cluster create k2 --template small --labels auto_healing_enabled=true --merge-labels --project team1",
		Args: exactArgs(1, "the cluster's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if tpl == "" {
				return usagef("--template is required")
			}
			if fip && noFIP || lb && noLB {
				return usagef("--floating-ip-enabled and --floating-ip-disabled (or --master-lb-enabled and --master-lb-disabled) exclude each other")
			}
			if uuid == "" {
				uuid = config.NewUUID()
			}
			op := map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": args[0], "uuid": uuid, "cluster_template": tpl,
				"node_count": nodes, "master_count": masters, "create_timeout": timeout, "merge_labels": merge, "project_id": project}
			f := cmd.Flags()
			for flag, kv := range map[string]struct {
				param string
				val   any
			}{"keypair": {"keypair", keypair}, "flavor": {"flavor_id", flavor}, "master-flavor": {"master_flavor_id", masterFlavor},
				"fixed-network": {"fixed_network", fixedNet}, "fixed-subnet": {"fixed_subnet", fixedSubnet},
				"discovery-url": {"discovery_url", discovery}, "docker-volume-size": {"docker_volume_size", volume}} {
				if f.Changed(flag) {
					op[kv.param] = kv.val
				}
			}
			if fip || noFIP {
				op["floating_ip_enabled"] = fip
			}
			if lb || noLB {
				op["master_lb_enabled"] = lb
			}
			if len(labels) > 0 {
				l, err := parseLabels(labels)
				if err != nil {
					return err
				}
				op["labels"] = l
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				return a.coeSubmitFollow(ctx, c, cmd.OutOrStdout(), op, uuid, w, func(id int64) string {
					return fmt.Sprintf("Request to create cluster %s accepted (job %d)", uuid, id)
				})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&tpl, "template", "", "the cluster template, name or uuid (required)")
	f.StringVar(&tpl, "cluster-template", "", "same as --template")
	f.Lookup("cluster-template").Hidden = true
	f.IntVar(&nodes, "node-count", 1, "workers in the default worker group")
	f.IntVar(&masters, "master-count", 1, "masters in the default master group")
	f.IntVar(&timeout, "timeout", 60, "minutes before the creation fails")
	f.StringArrayVar(&labels, "labels", nil, "KEY=VALUE[,KEY=VALUE...] labels (repeatable); they replace the template's unless --merge-labels")
	f.BoolVar(&merge, "merge-labels", false, "merge --labels into the template's labels")
	f.StringVar(&keypair, "keypair", "", "SSH keypair of the nodes (default: the template's)")
	f.StringVar(&flavor, "flavor", "", "flavor of the workers (default: the template's)")
	f.StringVar(&masterFlavor, "master-flavor", "", "flavor of the masters (default: the template's)")
	f.StringVar(&fixedNet, "fixed-network", "", "private network")
	f.StringVar(&fixedSubnet, "fixed-subnet", "", "private subnet")
	f.StringVar(&discovery, "discovery-url", "", "etcd discovery URL")
	f.IntVar(&volume, "docker-volume-size", 0, "container volume size in GB")
	f.BoolVar(&fip, "floating-ip-enabled", false, "give the nodes floating addresses (default: the template's)")
	f.BoolVar(&noFIP, "floating-ip-disabled", false, "give the nodes no floating address")
	f.BoolVar(&lb, "master-lb-enabled", false, "put a load balancer before the masters (default: the template's)")
	f.BoolVar(&noLB, "master-lb-disabled", false, "no load balancer before the masters")
	f.StringVar(&uuid, "uuid", "", "uuid to give the cluster (default: a new one)")
	f.StringVar(&project, "project", "", "project owning the cluster, counted against its quota (default: none)")
	addCOEWaitFlag(cmd, &w)
	return cmd
}

func (a *app) coeClusterListCmd() *cobra.Command {
	var o bmOutput
	var project, status string
	cmd := &cobra.Command{
		Use:     "list [--project P] [--status S]",
		Short:   "List the Kubernetes clusters of every project",
		Example: "  corral coe cluster list\n  corral coe cluster list -o +api_address,project_id\n  corral coe cluster list --status CREATE_FAILED -o name,status_reason",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				rs, err := coeClusters(ctx, c, nil)
				if err != nil {
					return err
				}
				sort.Slice(rs, func(i, j int) bool { return rs[i].Cluster.Name < rs[j].Cluster.Name })
				var objs []map[string]any
				for _, r := range rs {
					if project != "" && r.Cluster.ProjectID != project || status != "" && r.Cluster.Status != status {
						continue
					}
					objs = append(objs, clusterDoc(r))
				}
				if objs == nil {
					objs = []map[string]any{}
				}
				return a.writeCOEObjects(cmd.OutOrStdout(), &o, coeClusterDefaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, coeClusterDefaults)
	cmd.Flags().StringVar(&project, "project", "", "only the clusters of this project")
	cmd.Flags().StringVar(&status, "status", "", "only the clusters in this status")
	return cmd
}

func (a *app) coeClusterShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show CLUSTER",
		Short: "Show a cluster: fields, status, health, step conditions, node groups and nodes",
		Long: `Show a cluster's fields (as "openstack coe cluster show"), then the conditions
its jobs recorded per step (type, status, reason, message), then its node
groups with their Kubernetes nodes. -o json prints one object: the cluster's
fields, "conditions" and "nodegroups".`,
		Example: "  corral coe cluster show k1\n  corral coe cluster show k1 -o json",
		Args:    exactArgs(1, "a cluster name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkShowOutput(output); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				r, err := coeCluster(ctx, c, args[0])
				if err != nil {
					return err
				}
				return a.writeClusterShow(cmd.OutOrStdout(), output == "json", r)
			})
		},
	}
	addShowOutput(cmd, &output)
	return cmd
}

// writeClusterShow prints a cluster, its conditions and node groups.
func (a *app) writeClusterShow(w io.Writer, asJSON bool, r coewire.ClusterRecord) error {
	doc := clusterDoc(r)
	var conds []config.Condition
	if r.Status != nil {
		conds = slices.Clone(r.Status.Conditions)
	}
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].Time < conds[j].Time })
	groups := make([]map[string]any, len(r.NodeGroups))
	sort.SliceStable(r.NodeGroups, func(i, j int) bool {
		gi, gj := r.NodeGroups[i], r.NodeGroups[j]
		if gi.IsDefault != gj.IsDefault {
			return gi.IsDefault
		}
		if gi.Role != gj.Role {
			return gi.Role == config.COERoleMaster
		}
		return gi.Name < gj.Name
	})
	for i, g := range r.NodeGroups {
		groups[i] = nodeGroupDoc(g)
	}
	if asJSON {
		doc["conditions"] = jsonRound(map[string]any{"c": conds})["c"]
		if doc["conditions"] == nil {
			doc["conditions"] = []any{}
		}
		doc["nodegroups"] = jsonRound(map[string]any{"g": groups})["g"]
		return writeJSON(w, doc)
	}
	if err := a.writeObject(w, false, doc); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nConditions:")
	lines := [][]string{{"Type", "Status", "Reason", "Message", "Since"}}
	fm := &formatter{units: "m", loc: a.env.loc()}
	for _, cd := range conds {
		lines = append(lines, []string{cd.Type, cd.Status, orDash(cd.Reason), orDash(cd.Message), fm.time(cd.Time)})
	}
	if err := writeLines(w, lines, make([]bool, 5), ""); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nNode groups:")
	lines = [][]string{{"Name", "Role", "Default", "Nodes", "Status", "Kubernetes nodes"}}
	for _, g := range r.NodeGroups {
		nodes := "-"
		if len(g.Nodes) > 0 {
			nodes = fm.cell(kindOther, groupsNodes(g))
		}
		def := "N"
		if g.IsDefault {
			def = "Y"
		}
		st := g.Status
		if g.StatusReason != "" {
			st += ": " + g.StatusReason
		}
		lines = append(lines, []string{g.Name, g.Role, def, strconv.Itoa(g.NodeCount), st, nodes})
	}
	return writeLines(w, lines, []bool{false, false, false, true, false, false}, "")
}

func groupsNodes(g *config.COENodeGroup) []any {
	out := make([]any, len(g.Nodes))
	for i, n := range g.Nodes {
		out[i] = n
	}
	return out
}

func (a *app) coeClusterUpdateCmd() *cobra.Command {
	var w coeWaitOpts
	var rollback bool
	cmd := &cobra.Command{
		Use:   "update CLUSTER [replace] node_count=N [--wait[=SECONDS]]",
		Short: "Change a cluster (its node_count: the default worker group's size)",
		Long: `Change a cluster's fields as "openstack coe cluster update": only node_count
can change, which resizes the default worker group (see also resize). With
--rollback a change that fails gives the group its old node count back and
the cluster ends ROLLBACK_COMPLETE (ROLLBACK_FAILED if that fails too)
rather than UPDATE_FAILED.`,
		Example: "  corral coe cluster update k1 node_count=4 --wait",
		Args:    minArgs(2, "a cluster name or uuid and node_count=N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := parseChanges(args[1:], []string{"node_count"})
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				op := map[string]any{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": args[0], "changes": changes}
				if rollback {
					op["rollback"] = true
				}
				return a.coeAction(ctx, c, cmd.OutOrStdout(), op, args[0], "update", w)
			})
		},
	}
	cmd.Flags().BoolVar(&rollback, "rollback", false, "roll back to the old node count if the update fails")
	addCOEWaitFlag(cmd, &w)
	return cmd
}

func (a *app) coeClusterResizeCmd() *cobra.Command {
	var group string
	var remove []string
	var w coeWaitOpts
	var rollback bool
	cmd := &cobra.Command{
		Use:   "resize CLUSTER COUNT [--nodegroup G] [--nodes-to-remove a,b] [--wait[=SECONDS]]",
		Short: "Change a node group's node count, removing the named nodes first",
		Long: `Set the node count of a node group (default: the default worker group). When
it shrinks, the nodes named by --nodes-to-remove go first, then those the
scale manager picks: NotReady or cordoned nodes, then those with the fewest
pods.`,
		Example: "  corral coe cluster resize k1 5 --wait\n  corral coe cluster resize k1 2 --nodes-to-remove k1-default-worker-1,k1-default-worker-3",
		Args:    exactArgs(2, "a cluster name or uuid and the node count"),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return paramErr("COUNT %q: want a non-negative integer", args[1])
			}
			var names []string
			for _, r := range remove {
				names = append(names, splitList(r)...)
			}
			if names == nil {
				names = []string{}
			}
			op := map[string]any{"OP_ID": "OP_COE_CLUSTER_RESIZE", "cluster": args[0], "node_count": n, "nodes_to_remove": names}
			if rollback {
				op["rollback"] = true
			}
			if group != "" {
				op["nodegroup"] = group
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				return a.coeAction(ctx, c, cmd.OutOrStdout(), op, args[0], "resize", w)
			})
		},
	}
	cmd.Flags().StringVar(&group, "nodegroup", "", "the node group (default: the default worker group)")
	cmd.Flags().BoolVar(&rollback, "rollback", false, "roll back to the old node count if the resize fails")
	cmd.Flags().StringArrayVar(&remove, "nodes-to-remove", nil, "Kubernetes nodes to remove first, comma-separated (repeatable)")
	addCOEWaitFlag(cmd, &w)
	return cmd
}

func (a *app) coeClusterUpgradeCmd() *cobra.Command {
	var group string
	var batch int
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:   "upgrade CLUSTER TEMPLATE [--max-batch-size N] [--nodegroup G] [--wait[=SECONDS]]",
		Short: "Roll a cluster's node groups to another template, N nodes at a time",
		Long: `Move a cluster to another template of the same driver (a new kube_tag label,
say): masters first, then each node group, max-batch-size nodes at a time.`,
		Example: "  corral coe cluster upgrade k1 small-v1.31 --max-batch-size 2 --wait",
		Args:    exactArgs(2, "a cluster name or uuid and the template to upgrade to"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if batch < 1 {
				return paramErr("--max-batch-size %d: want 1 or more", batch)
			}
			op := map[string]any{"OP_ID": "OP_COE_CLUSTER_UPGRADE", "cluster": args[0], "cluster_template": args[1], "max_batch_size": batch}
			if group != "" {
				op["nodegroup"] = group
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				return a.coeAction(ctx, c, cmd.OutOrStdout(), op, args[0], "upgrade", w)
			})
		},
	}
	cmd.Flags().IntVar(&batch, "max-batch-size", 1, "nodes replaced at once")
	cmd.Flags().StringVar(&group, "nodegroup", "", "only this node group (default: all)")
	addCOEWaitFlag(cmd, &w)
	return cmd
}

func (a *app) coeClusterDeleteCmd() *cobra.Command {
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:   "delete CLUSTER... [--wait[=SECONDS]]",
		Short: "Delete clusters: their control planes, nodes, certificates and trusts",
		Long: `Delete clusters. Each goes to DELETE_IN_PROGRESS at once and disappears when its
job is done; with --wait the command follows each job until its cluster is
gone (or DELETE_FAILED, with the reason).`,
		Example: "  corral coe cluster delete k1 --wait",
		Args:    minArgs(1, "at least one cluster name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				jobs := make([]int64, len(args))
				for i, n := range args {
					id, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_CLUSTER_REMOVE", "cluster": n})
					if err != nil {
						return err
					}
					jobs[i] = id
					fmt.Fprintf(out, "Request to delete cluster %s has been accepted (job %d).\n", n, id)
				}
				if !w.on() {
					return nil
				}
				for i, n := range args {
					if err := a.coeFollow(ctx, c, out, jobs[i], n, w.secs); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	addCOEWaitFlag(cmd, &w)
	return cmd
}
