package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

func clusterHead() *cobra.Command {
	return newGroup("cluster", "Cluster-wide information and settings",
		"  corral cluster info\n  corral cluster verify\n  corral cluster modify --max-running-jobs 10")
}

func (a *app) addClusterCommands(c *cobra.Command) {
	c.AddCommand(a.clusterInfoCmd(), a.clusterVerifyCmd(), a.clusterModifyCmd(), a.clusterQueueCmd(), a.clusterWatcherCmd(), a.clusterReconcilerCmd(),
		a.clusterMasterFailoverCmd())
	c.AddCommand(a.clusterUpgradeSSHCmd())
	c.AddCommand(a.clusterMaintCommands()...)
	c.AddCommand(tagCommands(a, "cluster")...)
}

func (a *app) clusterInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the cluster's configuration",
		Long: `Show the cluster's configuration as returned by the master (QueryClusterInfo):
one "key: value" per line, nested parameters indented below their key.`,
		Example: "  corral cluster info\n  corral cluster info --json | jq .enabled_hypervisors",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				info, err := c.QueryClusterInfo(ctx)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if asJSON {
					b, err := json.MarshalIndent(info, "", "  ")
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(out, string(b))
					return err
				}
				f := &formatter{units: "h", loc: a.env.loc()}
				return f.writeReadable(out, info)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the information as JSON")
	return cmd
}

func (a *app) clusterVerifyCmd() *cobra.Command {
	var o jobOpts
	var verbose, errorCodes bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the cluster's configuration and nodes for problems",
		Long: `Check the configuration and every node (OP_CLUSTER_VERIFY) and print what was
found: lines starting "E:" are errors, "W:" warnings. The exit status is 1 when
errors were found.`,
		Example: "  corral cluster verify\n  corral cluster verify --submit",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			op := map[string]any{"OP_ID": "OP_CLUSTER_VERIFY"}
			if verbose {
				op["verbose"] = true
			}
			if errorCodes {
				op["error_codes"] = true
			}
			o.quiet = true
			return a.runJob(cmd, &o, op, printVerify)
		},
	}
	addJobFlags(cmd, &o, false)
	cmd.Flags().BoolVar(&verbose, "verbose", false, "report more details")
	cmd.Flags().BoolVar(&errorCodes, "error-codes", false, "print machine-parsable error codes")
	return cmd
}

// printVerify prints the messages of OP_CLUSTER_VERIFY's result and fails
// when the result is not ok.
func printVerify(w io.Writer, res any) error {
	m, _ := res.(map[string]any)
	msgs, _ := m["messages"].([]any)
	hasErr := false
	for _, v := range msgs {
		s := fmt.Sprint(v)
		hasErr = hasErr || strings.HasPrefix(s, "E:")
		fmt.Fprintln(w, s)
	}
	ok, known := m["ok"].(bool)
	if !known {
		ok = !hasErr
	}
	if e, isNum := m["errors"].(float64); isNum {
		wn, _ := m["warnings"].(float64)
		fmt.Fprintf(w, "Verify finished: %s error(s), %s warning(s)\n", formatNumber(e), formatNumber(wn))
	}
	if !ok {
		return &exitError{code: ExitError}
	}
	return nil
}

func (a *app) clusterModifyCmd() *cobra.Command {
	var o jobOpts
	var (
		poolSize, maxRunning, queueSize int
		macPrefix, hvs, templates       string
		sharedFileDir                   string
		clusterIP, masterNetdev         string
		masterNetmask                   int
		hvSpecs, osSpecs                []string
		be, nic, hiddenOS, blackOS      string
		applyUIDs                       func(map[string]any) error
	)
	sshYN := sshModifyFlags()
	cmd := &cobra.Command{
		Use:   "modify [flags]",
		Short: "Change cluster parameters",
		Long: `Change cluster parameters (OP_CLUSTER_SET_PARAMS). Only the parameters given
change. Parameter options use Ganeti's syntax: key=value pairs separated by
commas, with "hv:" or "os:" in front where a hypervisor or OS is named; in
-O, "-key" resets a key to its default.`,
		Example: `  corral cluster modify --candidate-pool-size 5 --max-running-jobs 10
  corral cluster modify -H kvm:kernel_path=/boot/vmlinuz,acpi=true -B memory=1G,vcpus=2
  corral cluster modify --hidden-os add:debian-old,remove:centos
  corral cluster modify --cluster-ip 192.0.2.1 --master-netdev br0 --master-netmask 24`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			op := map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS"}
			fl := cmd.Flags()
			ints := []struct {
				name string
				val  int
			}{{"candidate-pool-size", poolSize}, {"max-running-jobs", maxRunning}, {"job-queue-size", queueSize}}
			for _, n := range ints {
				if fl.Changed(n.name) {
					if n.val < 1 {
						return paramErr("--%s must be at least 1", n.name)
					}
					op[strings.ReplaceAll(n.name, "-", "_")] = n.val
				}
			}
			if fl.Changed("mac-prefix") {
				op["mac_prefix"] = macPrefix
			}
			if fl.Changed("shared-file-storage-dir") {
				op["shared_file_storage_dir"] = sharedFileDir
			}
			if fl.Changed("cluster-ip") {
				op["cluster_ip"] = clusterIP
			}
			if fl.Changed("master-netdev") {
				op["master_netdev"] = masterNetdev
			}
			if fl.Changed("master-netmask") {
				op["master_netmask"] = masterNetmask
			}
			lists := []struct {
				flag, param, val string
				parse            func(flag, s string) ([]any, error)
			}{
				{"--enabled-hypervisors", "enabled_hypervisors", hvs, parseNameList},
				{"--enabled-disk-templates", "enabled_disk_templates", templates, parseNameList},
				{"--hidden-os", "hidden_os", hiddenOS, parseListMods},
				{"--blacklisted-os", "blacklisted_os", blackOS, parseListMods},
			}
			for _, l := range lists {
				if fl.Changed(strings.TrimPrefix(l.flag, "--")) {
					v, err := l.parse(l.flag, l.val)
					if err != nil {
						return err
					}
					op[l.param] = v
				}
			}
			if len(hvSpecs) > 0 {
				v, err := parseGroups("-H", hvSpecs, false)
				if err != nil {
					return err
				}
				op["hvparams"] = v
			}
			if len(osSpecs) > 0 {
				v, err := parseGroups("-O", osSpecs, true)
				if err != nil {
					return err
				}
				op["osparams"] = v
			}
			if fl.Changed("backend-parameters") {
				v, err := parseBEParams("-B", be, false)
				if err != nil {
					return err
				}
				op["beparams"] = v
			}
			if fl.Changed("nic-parameters") {
				v, err := parseParams("-N", nic, false)
				if err != nil {
					return err
				}
				op["nicparams"] = v
			}
			if _, err := sshYN.fill(cmd, op); err != nil {
				return err
			}
			if err := fillSSHKeyFlags(cmd, op); err != nil {
				return err
			}
			if err := applyUIDs(op); err != nil {
				return err
			}
			if len(op) == 1 {
				return usagef("give at least one parameter to change")
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.IntVar(&poolSize, "candidate-pool-size", 0, "number of master candidates to keep")
	f.IntVar(&maxRunning, "max-running-jobs", 0, "how many jobs may run at the same time")
	f.IntVar(&queueSize, "job-queue-size", 0, "how many jobs the queue may hold")
	f.StringVar(&macPrefix, "mac-prefix", "", "prefix of generated MAC addresses (three octets, e.g. aa:00:00)")
	f.StringVar(&sharedFileDir, "shared-file-storage-dir", "", "directory of the sharedfile template, mounted at this path on every node")
	f.StringVar(&clusterIP, "cluster-ip", "", "the cluster's floating address (Ganeti's master IP), held by the node the master runs on; \"\" removes it")
	f.StringVar(&masterNetdev, "master-netdev", "", "network device the cluster IP is put on")
	f.IntVar(&masterNetmask, "master-netmask", 0, "prefix length of the cluster IP")
	f.StringVar(&hvs, "enabled-hypervisors", "", "comma-separated hypervisors instances may use; the first is the default")
	f.StringVar(&templates, "enabled-disk-templates", "", "comma-separated disk templates instances may use (diskless, file, rbd)")
	f.StringArrayVarP(&hvSpecs, "hypervisor-parameters", "H", nil, "hypervisor defaults, HV:key=value,... (repeatable)")
	f.StringVarP(&be, "backend-parameters", "B", "", "backend defaults, key=value,... (memory, maxmem, minmem with units; vcpus; auto_balance)")
	f.StringVarP(&nic, "nic-parameters", "N", "", "NIC defaults, key=value,... (mode=bridged|routed, link=BRIDGE)")
	f.StringArrayVarP(&osSpecs, "os-parameters", "O", nil, "OS defaults, OS:key=value,...; -key resets a key (repeatable)")
	f.StringVar(&hiddenOS, "hidden-os", "", "hide or show OSes: add:NAME,remove:NAME,...")
	f.StringVar(&blackOS, "blacklisted-os", "", "forbid or allow OSes for new instances: add:NAME,remove:NAME,...")
	applyUIDs = uidPoolFlags(cmd)
	sshYN.add(cmd)
	addSSHKeyFlags(cmd)
	return cmd
}

func (a *app) clusterQueueCmd() *cobra.Command {
	q := newGroup("queue", "Drain or undrain the job queue",
		"  corral cluster queue drain\n  corral cluster queue info")
	set := func(use, short string, drain bool) *cobra.Command {
		return &cobra.Command{
			Use:     use,
			Short:   short,
			Example: "  corral cluster queue " + use,
			Args:    noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx := cmd.Context()
				return a.env.withClient(ctx, func(c *luxi.Client) error { return c.SetDrainFlag(ctx, drain) })
			},
		}
	}
	info := &cobra.Command{
		Use:     "info",
		Short:   "Show whether the job queue is drained",
		Example: "  corral cluster queue info",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				vals, err := c.QueryConfigValues(ctx, []string{"drain_flag"})
				if err != nil {
					return err
				}
				state := "unset"
				if len(vals) == 1 && vals[0] == true {
					state = "set"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "The drain flag is %s\n", state)
				return nil
			})
		},
	}
	q.AddCommand(set("drain", "Stop the queue from accepting new jobs", true),
		set("undrain", "Let the queue accept new jobs again", false), info)
	return q
}

func (a *app) clusterWatcherCmd() *cobra.Command {
	w := newGroup("watcher", "Pause or resume the watcher",
		"  corral cluster watcher pause 1h\n  corral cluster watcher continue\n  corral cluster watcher info")
	pause := &cobra.Command{
		Use:   "pause DURATION",
		Short: "Pause the watcher for a while",
		Long: `Pause the watcher's periodic tasks (restarting instances, archiving jobs) for
DURATION: seconds, or a number with a suffix s, m, h, d or w.`,
		Example: "  corral cluster watcher pause 3600\n  corral cluster watcher pause 2h",
		Args:    exactArgs(1, "a duration"),
		RunE: func(cmd *cobra.Command, args []string) error {
			secs, err := parseTimespec(args[0])
			if err != nil {
				return err
			}
			until := float64(a.env.now().Unix() + secs)
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if err := c.SetWatcherPause(ctx, &until); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "The watcher is paused until %s.\n", a.formatEpoch(until))
				return nil
			})
		},
	}
	cont := &cobra.Command{
		Use:     "continue",
		Short:   "Resume the watcher",
		Example: "  corral cluster watcher continue",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if err := c.SetWatcherPause(ctx, nil); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "The watcher is no longer paused.")
				return nil
			})
		},
	}
	info := &cobra.Command{
		Use:     "info",
		Short:   "Show whether the watcher is paused",
		Example: "  corral cluster watcher info",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				vals, err := c.QueryConfigValues(ctx, []string{"watcher_pause"})
				if err != nil {
					return err
				}
				if len(vals) == 1 {
					if until, ok := vals[0].(float64); ok {
						fmt.Fprintf(cmd.OutOrStdout(), "The watcher is paused until %s.\n", a.formatEpoch(until))
						return nil
					}
				}
				fmt.Fprintln(cmd.OutOrStdout(), "The watcher is not paused.")
				return nil
			})
		},
	}
	w.AddCommand(pause, cont, info)
	return w
}

// formatEpoch prints an epoch time in the configured zone.
func (a *app) formatEpoch(sec float64) string {
	return time.Unix(int64(sec), 0).In(a.env.loc()).Format(timeLayout)
}
