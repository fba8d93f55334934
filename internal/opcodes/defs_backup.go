package opcodes

import (
	"slices"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Compressions are the disk stream compressions of exports, imports and
// moves (the compress parameter): Ganeti's, plus zstd. The nodes' stream
// package implements exactly these (its tests check it).
var Compressions = []string{"none", "gzip", "gzip-fast", "gzip-slow", "zstd"}

// CheckCompression accepts a compression name; "" means none.
func CheckCompression(c string) error {
	if c == "" || slices.Contains(Compressions, c) {
		return nil
	}
	return ecode.Errorf(ecode.Inval, "Unknown compression '%s' (valid: %s)", c, strings.Join(Compressions, ", "))
}

// backupDefs are the export, import and move opcodes (Ganeti's
// OpBackup*). Instance creation in import and remote-import mode is
// OP_INSTANCE_CREATE with the source_* parameters.
func backupDefs() []Def {
	inst := Param{Name: "instance_name", Type: TNEString, Required: true, Doc: "instance name"}
	instUUID := Param{Name: "instance_uuid", Type: TMaybeString, Default: nil, Doc: "instance uuid: must match instance_name"}
	return []Def{
		{ID: "OP_BACKUP_QUERY", Doc: "list the exports on the nodes", Params: []Param{
			{Name: "nodes", Type: TStringList, Default: []any{}, Doc: "node names (all when empty)"},
			{Name: "use_locking", Type: TBool, Default: false},
		}},
		{ID: "OP_BACKUP_PREPARE", KeyPrm: "instance_name", Doc: "prepare an instance export (remote: a signed transfer certificate)", Params: []Param{
			inst, instUUID,
			{Name: "mode", Type: TNEString, Required: true, Doc: "local | remote"},
		}},
		{ID: "OP_BACKUP_EXPORT", KeyPrm: "instance_name", Doc: "export an instance to a node or to another cluster", Params: []Param{
			inst, instUUID,
			{Name: "compress", Type: TString, Default: "none", Doc: "none | gzip | gzip-fast | gzip-slow | zstd"},
			{Name: "shutdown_timeout", Type: TNonNegInt, Default: float64(120), Doc: "seconds to wait for a clean shutdown"},
			{Name: "target_node", Type: TAny, Default: nil, Doc: "local: the node that keeps the export; remote: the signed disk destinations"},
			{Name: "target_node_uuid", Type: TMaybeString, Default: nil, Doc: "local: the uuid of the node that keeps the export; must match target_node"},
			{Name: "shutdown", Type: TBool, Default: true, Doc: "shut the instance down during the export"},
			{Name: "remove_instance", Type: TBool, Default: false, Doc: "remove the instance once exported"},
			{Name: "ignore_remove_failures", Type: TBool, Default: false},
			{Name: "mode", Type: TString, Default: "local", Doc: "local | remote"},
			{Name: "x509_key_name", Type: TAny, Default: nil, Doc: "remote: the signed key name from the prepare step"},
			{Name: "destination_x509_ca", Type: TMaybeString, Default: nil, Doc: "remote: the destination's signed certificate"},
			{Name: "zero_free_space", Type: TBool, Default: false},
			{Name: "zeroing_timeout_fixed", Type: TMaybeInt, Default: nil},
			{Name: "zeroing_timeout_per_mib", Type: TAny, Default: nil},
			{Name: "long_sleep", Type: TBool, Default: false},
		}},
		{ID: "OP_BACKUP_REMOVE", KeyPrm: "instance_name", Doc: "remove an instance's exports", Params: []Param{
			inst, instUUID,
		}},
		// Corral only: a move that fails before its export started gives
		// back the transfer key its prepare step made.
		{ID: "OP_BACKUP_CLEANUP", KeyPrm: "instance_name", Doc: "destroy the transfer key of a prepared export that will not run (Corral only)", Params: []Param{
			inst,
			{Name: "x509_key_name", Type: TAny, Required: true, Doc: "the signed key name the prepare step returned"},
		}},
	}
}
