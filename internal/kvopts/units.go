package kvopts

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// maxSizeLen bounds the text ParseUnitMiB looks at; no real size is longer,
// and it keeps the exact arithmetic cheap.
const maxSizeLen = 64

func unitErr(format string, args ...any) *ecode.Error {
	return ecode.New(ecode.UnitParseError, ecode.Inval, fmt.Sprintf(format, args...))
}

// ParseUnitMiB parses a size in Ganeti's notation and returns mebibytes: a
// plain number is MiB; the suffixes m, g and t (any case, optionally
// followed by "b" or "ib", optionally after spaces) mean MiB, GiB and TiB.
// Fractions round up to the next whole MiB ("1.5g" is 1536, "0.1" is 1).
// Unlike Ganeti, which also rounds up to a multiple of 4 MiB for LVM, the
// result is not rounded further; storage back-ends round as they need.
// Zero is accepted; negative, empty or malformed sizes and unknown units are
// errors.
func ParseUnitMiB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return 0, unitErr("empty size")
	case len(t) > maxSizeLen:
		return 0, unitErr("size %.20q... is too long", t)
	case t[0] == '-':
		return 0, unitErr("negative size %q", t)
	}
	end := 0
	for end < len(t) && (isDigit(t[end]) || t[end] == '.') {
		end++
	}
	num, unit := t[:end], strings.TrimLeft(t[end:], " \t")
	intPart, frac, _ := strings.Cut(num, ".")
	if intPart+frac == "" || strings.Contains(frac, ".") {
		return 0, unitErr("invalid size %q: expected a number with an optional unit (m, g, t)", t)
	}
	var mult int64
	switch strings.ToLower(unit) {
	case "", "m", "mb", "mib":
		mult = 1
	case "g", "gb", "gib":
		mult = 1 << 10
	case "t", "tb", "tib":
		mult = 1 << 20
	default:
		return 0, unitErr("invalid size %q: unknown unit %q (use m, g or t)", t, unit)
	}
	// Exact decimal arithmetic: float64 would misround "1.1g" and the like.
	n, ok := new(big.Int).SetString(intPart+frac+"0", 10) // "0" keeps "" digits valid
	if !ok {
		return 0, unitErr("invalid size %q", t)
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac)+1)), nil)
	n.Mul(n, big.NewInt(mult))
	q, r := new(big.Int).QuoRem(n, den, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, unitErr("size %q is too large", t)
	}
	return q.Int64(), nil
}

// FormatMiB writes a size in MiB in the largest unit that keeps it exact,
// such that ParseUnitMiB reads it back unchanged: 10240 is "10G", 1536 is
// "1536M".
func FormatMiB(mib int64) string {
	switch {
	case mib != 0 && mib%(1<<20) == 0:
		return fmt.Sprintf("%dT", mib>>20)
	case mib != 0 && mib%(1<<10) == 0:
		return fmt.Sprintf("%dG", mib>>10)
	}
	return fmt.Sprintf("%dM", mib)
}
