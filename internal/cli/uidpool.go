package cli

import (
	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/uidpool"
)

// uidPoolFlags adds Ganeti's --uid-pool, --add-uids and --remove-uids to a
// command and returns what copies the given ones into the opcode, as lists
// of [low, high] pairs.
func uidPoolFlags(cmd *cobra.Command) func(op map[string]any) error {
	var set, add, rm string
	f := cmd.Flags()
	f.StringVar(&set, "uid-pool", "", `replace the uid pool for security_model pool: "1000-1009, 2000" ("" empties it)`)
	f.StringVar(&add, "add-uids", "", `uid ranges to add to the uid pool, e.g. "2010-2019"`)
	f.StringVar(&rm, "remove-uids", "", "uid ranges to remove from the uid pool, each exactly as in it")
	return func(op map[string]any) error {
		for _, p := range []struct{ flag, param, val string }{
			{"uid-pool", "uid_pool", set}, {"add-uids", "add_uids", add}, {"remove-uids", "remove_uids", rm},
		} {
			if !f.Changed(p.flag) {
				continue
			}
			pool, err := uidpool.Parse(p.val)
			if err != nil {
				return paramErr("--%s: %v", p.flag, err)
			}
			op[p.param] = pool.Pairs()
		}
		return nil
	}
}
