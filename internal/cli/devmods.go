package cli

import (
	"strconv"

	"github.com/corral/corral/internal/kvopts"
)

// Disk and NIC modifications of "instance modify", in Ganeti's option
// syntax:
//
//	add:size=1G,mode=rw     add at the end
//	remove                  remove the last one
//	N:add,size=1G           add at index N (-1: at the end)
//	N:remove                remove the one at index N (or name or uuid)
//	N:mode=ro / N:modify,ip=... change the one at index N
//
// Each becomes an [operation, identifier, parameters] entry of
// OP_INSTANCE_SET_PARAMS's disks or nics.
func parseDevModFlags(flag string, specs []string, sizes bool) ([]any, error) {
	out := make([]any, 0, len(specs))
	for _, s := range specs {
		ident, kv, err := kvopts.ParseIdentKV(s)
		if err != nil {
			return nil, flagErr(flag, err)
		}
		op, id := "modify", any(ident)
		switch ident {
		case "add", "remove":
			op, id = ident, -1
		default:
			n := 0
			for _, a := range []string{"add", "remove", "modify", "attach", "detach"} {
				if v, ok := kv[a]; ok {
					if v != "true" {
						return nil, paramErr("%s: %q takes no value", flag, a)
					}
					delete(kv, a)
					op = a
					n++
				}
			}
			if n > 1 {
				return nil, paramErr("%s: Cannot do more than one of the following operations at the same time: add, attach, remove, detach, modify", flag)
			}
			if i, err := strconv.Atoi(ident); err == nil {
				id = i
			}
		}
		if (op == "remove" || op == "detach") && len(kv) > 0 {
			return nil, paramErr("%s: Not accepting parameters on removal/detach", flag)
		}
		params := map[string]any{}
		for k, v := range kv {
			params[k] = v
		}
		if sz, ok := kv["size"]; ok && sizes {
			n, err := kvopts.ParseUnitMiB(sz)
			if err != nil {
				return nil, flagErr(flag+" size", err)
			}
			params["size"] = n
		}
		out = append(out, []any{op, id, params})
	}
	return out, nil
}
