package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// instanceBatchCreateCmd is gnt-instance batch-create: a JSON file holds a
// list of OP_INSTANCE_CREATE parameter dicts; one OP_INSTANCE_MULTI_ALLOC
// places them all and submits a creation job for each, which the command
// then follows.
func (a *app) instanceBatchCreateCmd() *cobra.Command {
	var ialloc string
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "batch-create FILE",
		Short: "Create several instances placed together",
		Long: `Create the instances FILE describes (OP_INSTANCE_MULTI_ALLOC), as
gnt-instance batch-create does: FILE is a JSON list of dicts of
OP_INSTANCE_CREATE's parameters (instance_name, disk_template, disks, nics,
os_type, beparams, ...). Either every instance names its pnode or none
does; then the allocator (-I, else the cluster's default, else the built-in
one) places them all in one run, and one creation job per placed instance
follows. Instances the allocator could not place are listed and make the
command fail; the others are created all the same.`,
		Example: "  corral instance batch-create web.json\n  corral instance batch-create web.json -I hail --dry-run",
		Args:    exactArgs(1, "the JSON file of instances"),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		instances, err := readBatchCreateFile(args[0])
		if err != nil {
			return err
		}
		op := map[string]any{"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": instances}
		setNonEmpty(op, "iallocator", ialloc)
		var res multiAllocAnswer
		collect := func(w io.Writer, r any) error {
			if err := res.read(r); err != nil {
				return err
			}
			if o.dryRun {
				fmt.Fprintf(w, "Placed: %s\n", strings.Join(res.Allocatable, ", "))
			}
			if len(res.Failed) > 0 {
				fmt.Fprintf(w, "Could not place: %s\n", strings.Join(res.Failed, ", "))
			}
			return nil
		}
		if err := a.runJob(cmd, &o, op, collect); err != nil || o.submit {
			return err
		}
		unplaced := error(nil)
		if len(res.Failed) > 0 {
			unplaced = fmt.Errorf("the allocator could not place %d of %d instances", len(res.Failed), len(instances))
		}
		if o.dryRun || len(res.jobs) == 0 {
			return unplaced
		}
		err = a.env.withClient(cmd.Context(), func(c *luxi.Client) error {
			return a.followChildren(cmd, c, res.jobs, res.Allocatable)
		})
		if err != nil {
			return err
		}
		return unplaced
	}
	addJobFlags(cmd, &o, true)
	cmd.Flags().StringVarP(&ialloc, "iallocator", "I", "", "allocator placing the instances (e.g. hail)")
	return cmd
}

// readBatchCreateFile reads a batch-create file: a JSON list of dicts,
// each made an OP_INSTANCE_CREATE.
func readBatchCreateFile(path string) ([]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the instance definition file: %w", err)
	}
	var list []map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, paramErr("the instance definition file is not a JSON list of dicts: %v", err)
	}
	out := make([]any, 0, len(list))
	for i, m := range list {
		if id, ok := m["OP_ID"]; ok && id != "OP_INSTANCE_CREATE" {
			return nil, paramErr("definition %d is %v, not OP_INSTANCE_CREATE", i, id)
		}
		m["OP_ID"] = "OP_INSTANCE_CREATE"
		out = append(out, m)
	}
	return out, nil
}

// multiAllocAnswer is OP_INSTANCE_MULTI_ALLOC's result.
type multiAllocAnswer struct {
	Allocatable []string `json:"allocatable"`
	Failed      []string `json:"failed"`
	jobs        []int64
}

func (m *multiAllocAnswer) read(r any) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("reading the job result: %w", err)
	}
	if err := json.Unmarshal(b, m); err != nil {
		return fmt.Errorf("the job result %s is not a multi-allocation: %w", b, err)
	}
	m.jobs, err = childJobIDs(r)
	return err
}
