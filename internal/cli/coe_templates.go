package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/opcodes"
)

// coeTemplateDefaults are a template list's columns.
var coeTemplateDefaults = []string{"uuid", "name", "coe", "server_type", "cluster_distro", "driver", "public", "hidden"}

// templateFlag is one create flag of `openstack coe cluster template
// create` and the template field it sets.
type templateFlag struct {
	flag, field, help string
	kind              fieldKind
}

var templateFlags = []templateFlag{
	{"coe", "coe", "container orchestration engine: kubernetes (required)", kindText},
	{"image", "image_id", "image of the nodes (required)", kindText},
	{"server-type", "server_type", "vm (Corral instances or processes) or bm (bare-metal machines); default vm", kindText},
	{"cluster-distro", "cluster_distro", `the nodes' distribution; with coe and server type it picks the driver ("fake": the in-process test driver)`, kindText},
	{"keypair", "keypair_id", "SSH keypair of the nodes", kindText},
	{"external-network", "external_network_id", "external network", kindText},
	{"fixed-network", "fixed_network", "private network of the nodes", kindText},
	{"fixed-subnet", "fixed_subnet", "private subnet of the nodes", kindText},
	{"network-driver", "network_driver", "Kubernetes network driver (flannel, calico)", kindText},
	{"volume-driver", "volume_driver", "volume driver", kindText},
	{"dns-nameserver", "dns_nameserver", "DNS server of the nodes", kindText},
	{"flavor", "flavor_id", "flavor of the workers", kindText},
	{"master-flavor", "master_flavor_id", "flavor of the masters", kindText},
	{"docker-volume-size", "docker_volume_size", "container volume size in GB", kindNumber},
	{"docker-storage-driver", "docker_storage_driver", "container storage driver", kindText},
	{"http-proxy", "http_proxy", "HTTP proxy of the nodes", kindText},
	{"https-proxy", "https_proxy", "HTTPS proxy of the nodes", kindText},
	{"no-proxy", "no_proxy", "hosts the nodes reach without proxy", kindText},
	{"insecure-registry", "insecure_registry", "insecure container registry", kindText},
	{"apiserver-port", "apiserver_port", "Kubernetes API server port", kindNumber},
	{"tags", "tags", "tags (comma-separated)", kindText},
	{"public", "public", "every project may use the template", kindBool},
	{"hidden", "hidden", "leave the template out of users' lists", kindBool},
	{"tls-disabled", "tls_disabled", "serve the Kubernetes API without TLS", kindBool},
	{"registry-enabled", "registry_enabled", "run a container registry", kindBool},
	{"master-lb-enabled", "master_lb_enabled", "put a load balancer before the masters", kindBool},
	{"floating-ip-enabled", "floating_ip_enabled", "give the nodes floating addresses", kindBool},
}

// templateFlagAliases are the openstack client's other spellings.
var templateFlagAliases = map[string]string{"cluster-distro": "os", "image": "image-id"}

// templateChangeable are the fields `template update` takes.
var templateChangeable = append([]string{"name"}, opcodes.COETemplateFields...)

func (a *app) coeTemplateCreateCmd() *cobra.Command {
	var uuid, project, output string
	var labels []string
	strs := map[string]*string{}
	bools := map[string]*bool{}
	ints := map[string]*int{}
	cmd := &cobra.Command{
		Use:   "create NAME --coe kubernetes --image IMAGE [options]",
		Short: "Create a cluster template",
		Long: `Create a cluster template with the options of "openstack coe cluster template
create". The driver is chosen from the template's server type, cluster
distribution and COE; a template no driver provides is refused.`,
		Example: "  corral coe template create small --coe kubernetes --image kwok --cluster-distro fake\n" +
			"  corral coe template create kwok-small --coe kubernetes --image kwok --server-type vm \\\n" +
			"      --labels kube_tag=v1.31.0,workers=kwok --master-flavor m1 --flavor m1 --public",
		Args: exactArgs(1, "the template's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fields := map[string]any{}
			for _, tf := range templateFlags {
				if !cmd.Flags().Changed(tf.flag) && !cmd.Flags().Changed(templateFlagAliases[tf.flag]) {
					continue
				}
				switch tf.kind {
				case kindBool:
					fields[tf.field] = *bools[tf.field]
				case kindNumber:
					fields[tf.field] = *ints[tf.field]
				default:
					fields[tf.field] = *strs[tf.field]
				}
			}
			for _, req := range []string{"coe", "image_id"} {
				if s, _ := fields[req].(string); s == "" {
					return usagef("--coe and --image are required")
				}
			}
			if t, ok := fields["tags"].(string); ok {
				fields["tags"] = splitList(t)
			}
			if len(labels) > 0 {
				l, err := parseLabels(labels)
				if err != nil {
					return err
				}
				fields["labels"] = l
			}
			if uuid == "" {
				uuid = config.NewUUID()
			}
			op := map[string]any{"OP_ID": "OP_COE_TEMPLATE_CREATE", "name": args[0], "uuid": uuid, "fields": fields, "project_id": project}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if _, err := coeSubmit(ctx, c, op); err != nil {
					return err
				}
				t, err := coeTemplate(ctx, c, uuid)
				if err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", jsonRound(coeDoc(t)))
			})
		},
	}
	f := cmd.Flags()
	for _, tf := range templateFlags {
		switch tf.kind {
		case kindBool:
			bools[tf.field] = f.Bool(tf.flag, false, tf.help)
		case kindNumber:
			ints[tf.field] = f.Int(tf.flag, 0, tf.help)
		default:
			strs[tf.field] = f.String(tf.flag, "", tf.help)
		}
	}
	// The openstack client's spellings.
	f.StringVar(strs["cluster_distro"], "os", "", "same as --cluster-distro")
	f.StringVar(strs["image_id"], "image-id", "", "same as --image")
	f.Lookup("os").Hidden, f.Lookup("image-id").Hidden = true, true
	f.StringArrayVar(&labels, "labels", nil, "KEY=VALUE[,KEY=VALUE...] labels (repeatable)")
	f.StringVar(&uuid, "uuid", "", "uuid to give the template (default: a new one)")
	f.StringVar(&project, "project", "", "project owning the template (default: none, the administrators')")
	addShowOutput(cmd, &output)
	return cmd
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (a *app) coeTemplateListCmd() *cobra.Command {
	var o bmOutput
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the cluster templates of every project",
		Example: "  corral coe template list\n  corral coe template list -o name,driver,labels\n  corral coe template list -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ts, err := coeTemplates(ctx, c, nil)
				if err != nil {
					return err
				}
				sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
				objs := make([]map[string]any, len(ts))
				for i, t := range ts {
					objs[i] = jsonRound(templateDoc(t))
				}
				return a.writeCOEObjects(cmd.OutOrStdout(), &o, coeTemplateDefaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, coeTemplateDefaults)
	return cmd
}

// templateDoc is a template with its booleans always shown.
func templateDoc(t *config.COETemplate) map[string]any {
	doc := coeDoc(t)
	if doc["labels"] == nil {
		doc["labels"] = map[string]any{}
	}
	return doc
}

func (a *app) coeTemplateShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "show TEMPLATE",
		Short:   "Show a cluster template",
		Example: "  corral coe template show small\n  corral coe template show small -o json",
		Args:    exactArgs(1, "a template name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkShowOutput(output); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				t, err := coeTemplate(ctx, c, args[0])
				if err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", jsonRound(templateDoc(t)))
			})
		},
	}
	addShowOutput(cmd, &output)
	return cmd
}

func (a *app) coeTemplateUpdateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "update TEMPLATE [replace] NAME=VALUE... | update TEMPLATE remove NAME...",
		Short: "Change a cluster template's fields",
		Long: fmt.Sprintf(`Change fields of a template: NAME=VALUE pairs, with the values typed by field
(true/false, integers, labels as KEY=VALUE,KEY=VALUE); "remove NAME" or
NAME=null unsets an optional field. The words "replace" and "add" of the
openstack client are accepted and mean the same.

A template a cluster uses may change only its name, public, hidden and tags.

Fields: %s`, strings.Join(templateChangeable, ", ")),
		Example: "  corral coe template update small public=true labels=kube_tag=v1.31.0,workers=kwok\n" +
			"  corral coe template update small replace name=tiny\n  corral coe template update small remove http_proxy",
		Args: minArgs(2, "a template name or uuid and at least one NAME=VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := parseChanges(args[1:], templateChangeable)
			if err != nil {
				return err
			}
			if t, ok := changes["tags"].(string); ok {
				changes["tags"] = splitList(t)
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				t, err := coeTemplate(ctx, c, args[0])
				if err != nil {
					return err
				}
				if _, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_TEMPLATE_MODIFY",
					"cluster_template": t.UUID, "changes": changes}); err != nil {
					return err
				}
				if t, err = coeTemplate(ctx, c, t.UUID); err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", jsonRound(templateDoc(t)))
			})
		},
	}
	addShowOutput(cmd, &output)
	return cmd
}

func (a *app) coeTemplateDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete TEMPLATE...",
		Short:   "Remove cluster templates no cluster uses",
		Example: "  corral coe template delete small",
		Args:    minArgs(1, "at least one template name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				for _, n := range args {
					if _, err := coeSubmit(ctx, c, map[string]any{"OP_ID": "OP_COE_TEMPLATE_REMOVE", "cluster_template": n}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Request to delete cluster template %s has been accepted.\n", n)
				}
				return nil
			})
		},
	}
}
