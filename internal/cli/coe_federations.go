package cli

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// coeFederationDefaults are a federation list's columns (Magnum's list
// fields).
var coeFederationDefaults = []string{"uuid", "name", "hostcluster_id", "member_ids", "status", "properties"}

// coeFederations asks corrald for federations by name or uuid, all when
// none.
func coeFederations(ctx context.Context, c *luxi.Client, names []string) ([]*config.COEFederation, error) {
	var out []*config.COEFederation
	if names == nil {
		names = []string{}
	}
	err := c.Call(ctx, coewire.MethodFederations, []any{names}, &out)
	return out, err
}

func federationDoc(f *config.COEFederation) map[string]any {
	doc := coeDoc(f)
	if doc["member_ids"] == nil {
		doc["member_ids"] = []any{}
	}
	return jsonRound(doc)
}

func (a *app) addCOEFederationCommands(coe *cobra.Command) {
	fed := newGroup("federation", "Group clusters of a project under a host cluster (Magnum's federations)",
		"  corral coe federation list\n  corral coe federation create f1 --hostcluster k1 --member k2 --dns-zone example.com.")
	fed.AddCommand(a.coeFederationListCmd(), a.coeFederationShowCmd(), a.coeFederationCreateCmd(),
		a.coeFederationUpdateCmd(), a.coeFederationDeleteCmd())
	coe.AddCommand(fed)
}

func (a *app) coeFederationListCmd() *cobra.Command {
	var o bmOutput
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the federations",
		Example: "  corral coe federation list",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				fs, err := coeFederations(ctx, c, nil)
				if err != nil {
					return err
				}
				sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
				objs := make([]map[string]any, len(fs))
				for i, f := range fs {
					objs[i] = federationDoc(f)
				}
				return a.writeCOEObjects(cmd.OutOrStdout(), &o, coeFederationDefaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, coeFederationDefaults)
	return cmd
}

func (a *app) coeFederationShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "show FEDERATION",
		Short:   "Show a federation",
		Example: "  corral coe federation show f1",
		Args:    exactArgs(1, "a federation"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				fs, err := coeFederations(ctx, c, args)
				if err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", federationDoc(fs[0]))
			})
		},
	}
	addShowOutput(cmd, &output)
	return cmd
}

func (a *app) coeFederationCreateCmd() *cobra.Command {
	var host, zone, project string
	var members []string
	var props map[string]string
	cmd := &cobra.Command{
		Use:   "create NAME --hostcluster C --dns-zone Z [--member C]... [--property k=v]... [--project P]",
		Short: "Create a federation of clusters",
		Long: `Create a federation: a host cluster and member clusters of one project (each
member complete), with properties, of which dns-zone is required.`,
		Example: "  corral coe federation create f1 --hostcluster k1 --member k2 --member k3 --dns-zone example.com.",
		Args:    exactArgs(1, "a federation name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if host == "" || zone == "" {
				return usagef("--hostcluster and --dns-zone are required")
			}
			if props == nil {
				props = map[string]string{}
			}
			props["dns-zone"] = zone
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				id := config.NewUUID()
				job, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_FEDERATION_CREATE", "name": args[0], "uuid": id,
					"hostcluster_id": host, "member_ids": stringsAny(members), "properties": props, "project_id": project})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Request to create federation %s accepted (job %d)\n", id, job)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&host, "hostcluster", "", "the host cluster (name or uuid)")
	f.StringArrayVar(&members, "member", nil, "a member cluster (name or uuid); repeat for more")
	f.StringVar(&zone, "dns-zone", "", "the federation's DNS zone")
	f.StringToStringVar(&props, "property", nil, "another property k=v")
	f.StringVar(&project, "project", "", "the project the federation belongs to (default: none)")
	return cmd
}

func (a *app) coeFederationUpdateCmd() *cobra.Command {
	var join, unjoin []string
	var zone string
	cmd := &cobra.Command{
		Use:   "update FEDERATION [--join C]... [--unjoin C]... [--dns-zone Z]",
		Short: "Join clusters to a federation, unjoin them, or change its DNS zone",
		Example: "  corral coe federation update f1 --join k4\n" +
			"  corral coe federation update f1 --unjoin k2 --dns-zone other.org.",
		Args: exactArgs(1, "a federation"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(join) == 0 && len(unjoin) == 0 && zone == "" {
				return usagef("nothing to change: give --join, --unjoin or --dns-zone")
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				fs, err := coeFederations(ctx, c, args)
				if err != nil {
					return err
				}
				changes, err := federationChanges(ctx, c, fs[0], join, unjoin, zone)
				if err != nil {
					return err
				}
				job, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_FEDERATION_MODIFY", "federation": fs[0].UUID,
					"changes": changes, "project_id": fs[0].ProjectID})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Request to update federation %s accepted (job %d)\n", fs[0].UUID, job)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&join, "join", nil, "a cluster to join (name or uuid); repeat for more")
	f.StringArrayVar(&unjoin, "unjoin", nil, "a member to remove (name or uuid); repeat for more")
	f.StringVar(&zone, "dns-zone", "", "the new DNS zone")
	return cmd
}

// federationChanges are an update's changes: the new member list and
// properties.
func federationChanges(ctx context.Context, c *luxi.Client, f *config.COEFederation, join, unjoin []string, zone string) (map[string]any, error) {
	changes := map[string]any{}
	if len(join) > 0 || len(unjoin) > 0 {
		members := slices.Clone(f.Members)
		uuidOf := func(ident string) (string, error) {
			if slices.Contains(members, ident) {
				return ident, nil
			}
			cs, err := coeClusters(ctx, c, []string{ident})
			if err != nil {
				return "", err
			}
			return cs[0].Cluster.UUID, nil
		}
		for _, j := range join {
			id, err := uuidOf(j)
			if err != nil {
				return nil, err
			}
			members = append(members, id)
		}
		for _, u := range unjoin {
			id, err := uuidOf(u)
			if err != nil {
				return nil, err
			}
			i := slices.Index(members, id)
			if i < 0 {
				return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s is not a member of the federation %s.", u, f.Name)
			}
			members = slices.Delete(members, i, i+1)
		}
		changes["member_ids"] = stringsAny(members)
	}
	if zone != "" {
		props := map[string]any{}
		for k, v := range f.Properties {
			props[k] = v
		}
		props["dns-zone"] = zone
		changes["properties"] = props
	}
	return changes, nil
}

func (a *app) coeFederationDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete FEDERATION...",
		Short:   "Remove federations (their clusters stay)",
		Example: "  corral coe federation delete f1",
		Args:    minArgs(1, "federations"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				for _, name := range args {
					if _, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_FEDERATION_REMOVE", "federation": name}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Request to delete federation %s has been accepted.\n", name)
				}
				return nil
			})
		},
	}
}

func stringsAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
