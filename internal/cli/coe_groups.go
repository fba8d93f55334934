package cli

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/coe/api"
	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// coeNodeGroupDefaults are a node group list's columns, as `openstack coe
// nodegroup list`.
var coeNodeGroupDefaults = []string{"uuid", "name", "flavor_id", "image_id", "node_count", "status", "role"}

// coeNodeGroups asks corrald for a cluster's node groups (all when names
// is empty).
func coeNodeGroups(ctx context.Context, c *luxi.Client, cluster string, names []string) ([]*config.COENodeGroup, error) {
	var out []*config.COENodeGroup
	err := c.Call(ctx, coewire.MethodNodeGroups, []any{coewire.NodeGroupArgs{Cluster: cluster, Names: names}}, &out)
	return out, err
}

func coeNodeGroup(ctx context.Context, c *luxi.Client, cluster, name string) (*config.COENodeGroup, error) {
	gs, err := coeNodeGroups(ctx, c, cluster, []string{name})
	if err != nil {
		return nil, err
	}
	if len(gs) != 1 {
		return nil, fmt.Errorf("node group %s: corrald answered %d node groups", name, len(gs))
	}
	return gs[0], nil
}

func (a *app) coeNodeGroupCreateCmd() *cobra.Command {
	var role, flavor, image, uuid string
	var nodes, minNodes, maxNodes, volume int
	var labels []string
	var merge bool
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:   "create CLUSTER NAME [--node-count N] [--min-nodes N] [--max-nodes N] [--wait[=SECONDS]]",
		Short: "Add a node group of workers to a cluster",
		Long: `Add a node group: the command returns once the group is stored with status
CREATE_IN_PROGRESS; with --wait it follows the job until the group's nodes
are there.`,
		Example: "  corral coe nodegroup create k1 big --node-count 2 --flavor large --max-nodes 5 --wait",
		Args:    exactArgs(2, "a cluster name or uuid and the group's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if uuid == "" {
				uuid = config.NewUUID()
			}
			op := map[string]any{"OP_ID": "OP_COE_NODEGROUP_CREATE", "cluster": args[0], "name": args[1], "uuid": uuid,
				"role": role, "node_count": nodes, "min_node_count": minNodes, "merge_labels": merge}
			f := cmd.Flags()
			if f.Changed("max-nodes") {
				op["max_node_count"] = maxNodes
			}
			if flavor != "" {
				op["flavor_id"] = flavor
			}
			if image != "" {
				op["image_id"] = image
			}
			if f.Changed("docker-volume-size") {
				op["docker_volume_size"] = volume
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
				return a.coeSubmitFollow(ctx, c, cmd.OutOrStdout(), op, args[0], w, func(id int64) string {
					return fmt.Sprintf("Request to create the node group %s (%s) of cluster %s has been accepted (job %d).", args[1], uuid, args[0], id)
				})
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "worker", "the group's role (any name but master)")
	f.IntVar(&nodes, "node-count", 1, "nodes")
	f.IntVar(&minNodes, "min-nodes", 0, "least nodes autoscaling may leave")
	f.IntVar(&maxNodes, "max-nodes", 0, "most nodes autoscaling may make (default: no limit)")
	f.StringVar(&flavor, "flavor", "", "flavor (default: the cluster's)")
	f.StringVar(&image, "image", "", "image (default: the template's)")
	f.IntVar(&volume, "docker-volume-size", 0, "container volume size in GB")
	f.StringArrayVar(&labels, "labels", nil, "KEY=VALUE[,KEY=VALUE...] labels (repeatable)")
	f.BoolVar(&merge, "merge-labels", false, "merge --labels into the cluster's labels")
	f.StringVar(&uuid, "uuid", "", "uuid to give the group (default: a new one)")
	addCOEWaitFlag(cmd, &w)
	return cmd
}

func (a *app) coeNodeGroupListCmd() *cobra.Command {
	var o bmOutput
	var role string
	cmd := &cobra.Command{
		Use:     "list CLUSTER [--role ROLE]",
		Short:   "List a cluster's node groups",
		Example: "  corral coe nodegroup list k1\n  corral coe nodegroup list k1 -o name,node_count,nodes",
		Args:    exactArgs(1, "a cluster name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				gs, err := coeNodeGroups(ctx, c, args[0], nil)
				if err != nil {
					return err
				}
				sort.Slice(gs, func(i, j int) bool { return gs[i].Name < gs[j].Name })
				objs := []map[string]any{}
				for _, g := range gs {
					if role == "" || g.Role == role {
						objs = append(objs, nodeGroupDoc(g))
					}
				}
				return a.writeCOEObjects(cmd.OutOrStdout(), &o, coeNodeGroupDefaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, coeNodeGroupDefaults)
	cmd.Flags().StringVar(&role, "role", "", "only the groups of this role")
	return cmd
}

func (a *app) coeNodeGroupShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "show CLUSTER NODEGROUP",
		Short:   "Show a node group and its Kubernetes nodes",
		Example: "  corral coe nodegroup show k1 default-worker",
		Args:    exactArgs(2, "a cluster name or uuid and a node group name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkShowOutput(output); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				g, err := coeNodeGroup(ctx, c, args[0], args[1])
				if err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", nodeGroupDoc(g))
			})
		},
	}
	addShowOutput(cmd, &output)
	return cmd
}

// nodeGroupChangeable are the fields `nodegroup update` takes.
var nodeGroupChangeable = []string{"node_count", "min_node_count", "max_node_count"}

func (a *app) coeNodeGroupUpdateCmd() *cobra.Command {
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:   "update CLUSTER NODEGROUP [replace] NAME=VALUE... [--wait[=SECONDS]]",
		Short: "Change a node group's node_count, min_node_count or max_node_count",
		Long: `Change a node group's counts (NAME=VALUE, the openstack client's "replace"
word accepted); max_node_count=null removes the upper limit. The node count
must stay within min..max.`,
		Example: "  corral coe nodegroup update k1 big max_node_count=6 min_node_count=2\n  corral coe nodegroup update k1 big node_count=3 --wait",
		Args:    minArgs(3, "a cluster name or uuid, a node group and at least one NAME=VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := parseChanges(args[2:], nodeGroupChangeable)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				return a.coeAction(ctx, c, cmd.OutOrStdout(), map[string]any{"OP_ID": "OP_COE_NODEGROUP_MODIFY",
					"cluster": args[0], "nodegroup": args[1], "changes": changes}, args[0], "update node group "+args[1]+" of", w)
			})
		},
	}
	addCOEWaitFlag(cmd, &w)
	return cmd
}

func (a *app) coeNodeGroupDeleteCmd() *cobra.Command {
	var w coeWaitOpts
	cmd := &cobra.Command{
		Use:     "delete CLUSTER NODEGROUP... [--wait[=SECONDS]]",
		Short:   "Remove node groups (not the default ones) and their nodes",
		Example: "  corral coe nodegroup delete k1 big --wait",
		Args:    minArgs(2, "a cluster name or uuid and at least one node group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				for _, g := range args[1:] {
					if err := a.coeAction(ctx, c, cmd.OutOrStdout(), map[string]any{"OP_ID": "OP_COE_NODEGROUP_REMOVE",
						"cluster": args[0], "nodegroup": g}, args[0], "delete node group "+g+" of", w); err != nil {
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

// coeQuotaDefaults are a quota list's columns.
var coeQuotaDefaults = []string{"project_id", "resource", "hard_limit"}

func coeQuotas(ctx context.Context, c *luxi.Client) ([]*config.COEQuota, error) {
	var out []*config.COEQuota
	err := c.Call(ctx, coewire.MethodQuotas, nil, &out)
	return out, err
}

func quotaDoc(q *config.COEQuota) map[string]any {
	doc := map[string]any{"project_id": q.ProjectID, "resource": q.Resource, "hard_limit": float64(q.HardLimit)}
	if q.CTime > 0 {
		doc["created_at"] = isoUTC(q.CTime)
	}
	if q.MTime > 0 && q.MTime != q.CTime {
		doc["updated_at"] = isoUTC(q.MTime)
	}
	return doc
}

// quotaFlags are --project-id and --resource, as `openstack coe quotas`.
type quotaFlags struct{ project, resource string }

func (q *quotaFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&q.project, "project-id", "", "the project (required)")
	cmd.Flags().StringVar(&q.resource, "resource", "Cluster", "the resource (Magnum knows only Cluster)")
}

func (q *quotaFlags) check() error {
	if q.project == "" {
		return usagef("--project-id is required")
	}
	return nil
}

func (a *app) coeQuotaSetCmd() *cobra.Command {
	var qf quotaFlags
	var limit int
	var output string
	cmd := &cobra.Command{
		Use:   "set --project-id P --hard-limit N [--resource Cluster]",
		Short: "Set a project's hard limit of clusters (creating or changing its quota)",
		Long: `Set how many clusters a project may have; creating one more is refused.
Without a quota a project may have 20 (Magnum's default).`,
		Example: "  corral coe quota set --project-id team1 --hard-limit 5",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qf.check(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("hard-limit") || limit < 0 {
				return usagef("--hard-limit N (0 or more) is required")
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				q, err := findQuota(ctx, c, qf.project, qf.resource)
				if err != nil {
					return err
				}
				if _, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_QUOTA_SET", "project_id": qf.project,
					"resource": qf.resource, "hard_limit": limit, "create": q == nil}); err != nil {
					return err
				}
				if q, err = findQuota(ctx, c, qf.project, qf.resource); err != nil {
					return err
				}
				if q == nil {
					return ecode.Errorf(ecode.NoEnt, "Quota could not be found for project %s and resource %s.", qf.project, qf.resource)
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", quotaDoc(q))
			})
		},
	}
	qf.add(cmd)
	cmd.Flags().IntVar(&limit, "hard-limit", 0, "clusters the project may have (required)")
	addShowOutput(cmd, &output)
	return cmd
}

// findQuota is the quota set for project and resource, nil when none is.
func findQuota(ctx context.Context, c *luxi.Client, project, resource string) (*config.COEQuota, error) {
	qs, err := coeQuotas(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if q.ProjectID == project && q.Resource == resource {
			return q, nil
		}
	}
	return nil, nil
}

func (a *app) coeQuotaListCmd() *cobra.Command {
	var o bmOutput
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the quotas set (projects without one have the default, 20 clusters)",
		Example: "  corral coe quota list",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				qs, err := coeQuotas(ctx, c)
				if err != nil {
					return err
				}
				sort.Slice(qs, func(i, j int) bool {
					return qs[i].ProjectID < qs[j].ProjectID || qs[i].ProjectID == qs[j].ProjectID && qs[i].Resource < qs[j].Resource
				})
				objs := make([]map[string]any, len(qs))
				for i, q := range qs {
					objs[i] = quotaDoc(q)
				}
				return a.writeCOEObjects(cmd.OutOrStdout(), &o, coeQuotaDefaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, coeQuotaDefaults)
	return cmd
}

func (a *app) coeQuotaShowCmd() *cobra.Command {
	var qf quotaFlags
	var output string
	cmd := &cobra.Command{
		Use:     "show --project-id P [--resource Cluster]",
		Short:   "Show a project's quota (the default when none is set)",
		Example: "  corral coe quota show --project-id team1",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qf.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				q, err := findQuota(ctx, c, qf.project, qf.resource)
				if err != nil {
					return err
				}
				if q == nil && qf.resource != "Cluster" {
					return ecode.Errorf(ecode.NoEnt, "Quota could not be found for project %s and resource %s.", qf.project, qf.resource)
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", quotaDoc(api.QuotaOrDefault(q, qf.project)))
			})
		},
	}
	qf.add(cmd)
	addShowOutput(cmd, &output)
	return cmd
}

func (a *app) coeQuotaDeleteCmd() *cobra.Command {
	var qf quotaFlags
	cmd := &cobra.Command{
		Use:     "delete --project-id P [--resource Cluster]",
		Short:   "Remove a project's quota: it gets the default again",
		Example: "  corral coe quota delete --project-id team1",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := qf.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if _, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_QUOTA_REMOVE", "project_id": qf.project, "resource": qf.resource}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Request to delete the %s quota of project %s has been accepted.\n", qf.resource, qf.project)
				return nil
			})
		},
	}
	qf.add(cmd)
	return cmd
}

func (a *app) coeServiceListCmd() *cobra.Command {
	var o bmOutput
	defaults := []string{"host", "binary", "up", "since"}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the processes acting for the clusters (corrald on the master)",
		Example: "  corral coe service list",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var ss []coewire.Service
				if err := c.Call(ctx, coewire.MethodServices, nil, &ss); err != nil {
					return err
				}
				objs := make([]map[string]any, len(ss))
				for i, s := range ss {
					objs[i] = map[string]any{"host": s.Host, "binary": s.Binary, "up": s.Up, "since": nil}
					if s.Since > 0 {
						objs[i]["since"] = isoUTC(s.Since)
					}
				}
				return a.writeCOEObjects(cmd.OutOrStdout(), &o, defaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, defaults)
	return cmd
}
