package opcodes

import (
	"unicode"
	"unicode/utf8"

	"github.com/corral/corral/internal/ecode"
)

// Tag kinds, as Ganeti names them in OP_TAGS_* and LUXI QueryTags.
const (
	TagCluster   = "cluster"
	TagNode      = "node"
	TagInstance  = "instance"
	TagNodeGroup = "nodegroup"
	TagNetwork   = "network"
)

// Ganeti's limits on tags (constants.MAX_TAG_LEN, MAX_TAGS_PER_OBJ).
const (
	MaxTagLen        = 128
	MaxTagsPerObject = 4096
)

// tagDefs are the tag opcodes (OP_TAGS_*).
func tagDefs() []Def {
	kind := Param{Name: "kind", Type: TNEString, Required: true, Doc: "cluster | node | instance | nodegroup | network"}
	// Ganeti sends null (or omits the name) for the cluster.
	name := Param{Name: "name", Type: TMaybeString, Default: nil, Doc: "object name (none for the cluster)"}
	tags := Param{Name: "tags", Type: TStringList, Required: true, Doc: "tag names"}
	return []Def{
		{ID: "OP_TAGS_GET", KeyPrm: "name", Doc: "list an object's tags", Params: []Param{
			kind, name,
			{Name: "use_locking", Type: TBool, Default: false, Doc: "take the object's lock while reading"},
		}},
		{ID: "OP_TAGS_SEARCH", KeyPrm: "pattern", Doc: "find tags matching a regular expression", Params: []Param{
			{Name: "pattern", Type: TNEString, Required: true, Doc: "regular expression searched in every tag"},
		}},
		{ID: "OP_TAGS_SET", KeyPrm: "name", Doc: "add tags to an object", Params: []Param{kind, name, tags}},
		{ID: "OP_TAGS_DEL", KeyPrm: "name", Doc: "remove tags from an object", Params: []Param{kind, name, tags}},
	}
}

// ValidateTagKind accepts the kinds Ganeti knows.
func ValidateTagKind(kind string) error {
	switch kind {
	case TagCluster, TagNode, TagInstance, TagNodeGroup, TagNetwork:
		return nil
	}
	return ecode.Errorf(ecode.Inval, "Wrong tag type requested (%s)", kind)
}

// ValidateTag applies Ganeti's rules to one tag: at most MaxTagLen
// characters, not empty, and only word characters and . + * / : @ -.
// Python's \w is Unicode-aware, so letters and digits of any script pass.
func ValidateTag(tag string) error {
	if utf8.RuneCountInString(tag) > MaxTagLen {
		return ecode.Errorf(ecode.Inval, "Tag too long (>%d characters)", MaxTagLen)
	}
	if tag == "" {
		return ecode.Errorf(ecode.Inval, "Tags cannot be empty")
	}
	for _, r := range tag {
		if !tagRune(r) {
			return ecode.Errorf(ecode.Inval, "Tag contains invalid characters")
		}
	}
	return nil
}

func tagRune(r rune) bool {
	switch r {
	case '_', '.', '+', '*', '/', ':', '@', '-':
		return true
	case utf8.RuneError:
		// Also what an invalid UTF-8 byte decodes to.
		return false
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}
