// Package qlang parses the text form of Ganeti's query filter language
// (what -F takes) into the list form the master's queries run; the CLI
// links it without the master's query engine.
package qlang

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// The text form of the filter language, as Ganeti's command line tools
// take it after -F (Ganeti's lib/qlang.py), e.g.
//
//	admin_state == "up" and not (name =~ m/^test/i or "gpu" in tags)
//
// Conditions: field (true), field OP value with OP one of == = != < <= >
// >=, field =~ REGEXP and field !~ REGEXP (REGEXP is [m]/.../flags with /,
// #, ^ or | as delimiter and flags i and s), field =* "glob" and field !*
// "glob" (DNS name globs: * and ? stop at dots), value in field, value not
// in field. Values are integers or quoted strings. "not" binds tighter
// than "and", which binds tighter than "or".

// ParseText parses a filter in the text form into the list form Query
// takes.
func ParseText(text string) (any, error) {
	p := &qparser{text: text}
	if err := p.lex(); err != nil {
		return nil, p.fail(err.Error())
	}
	if len(p.toks) == 0 {
		return nil, p.fail("empty filter")
	}
	f, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, p.fail(fmt.Sprintf("unexpected %q at position %d", p.toks[p.pos].text, p.toks[p.pos].at+1))
	}
	return f, nil
}

// MakeFilter turns a list command's arguments into a filter as Ganeti's
// tools do: one argument that looks like a filter (or any argument with
// force) is parsed as one; otherwise each argument is a name (a glob
// when it has * or ?) of namefield, or an integer when numeric; no
// arguments, no filter.
func MakeFilter(args []string, force bool, namefield string, numeric bool) (any, error) {
	if namefield == "" {
		namefield = "name"
	}
	if force || (len(args) == 1 && strings.ContainsAny(args[0], "! \"')(\v\n\r\f/<\t>=\\~")) {
		if len(args) != 1 {
			return nil, ecode.Errorf(ecode.Inval, "Exactly one argument must be given as a filter")
		}
		return ParseText(args[0])
	}
	if len(args) == 0 {
		return nil, nil
	}
	out := []any{"|"}
	for _, a := range args {
		switch {
		case numeric:
			n, err := strconv.ParseInt(a, 10, 64)
			if err != nil {
				return nil, ecode.Errorf(ecode.Inval, "Invalid job ID passed: %s", a)
			}
			out = append(out, []any{"=", namefield, n})
		case strings.ContainsAny(a, "*?"):
			out = append(out, []any{"=~", namefield, GlobPattern(a)})
		default:
			out = append(out, []any{"=", namefield, a})
		}
	}
	return out, nil
}

// GlobPattern is the regular expression of a DNS name glob: * and ?
// match within one part of the name, and the match may stop before a
// dot ("web*" matches "web1.example.com").
func GlobPattern(glob string) string {
	var b strings.Builder
	b.WriteByte('^')
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(`[^.]*`)
		case '?':
			b.WriteString(`[^.]`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`(\..*)?$`)
	return b.String()
}

type qtokKind int

const (
	tIdent qtokKind = iota
	tNumber
	tString
	tRegexp
	tOp
	tLParen
	tRParen
)

type qtok struct {
	kind qtokKind
	text string // identifier, operator, string contents or regexp
	num  int64
	at   int
}

type qparser struct {
	text string
	toks []qtok
	pos  int
}

func (p *qparser) fail(msg string) error {
	return ecode.Errorf(ecode.Inval, "Failed to parse query filter '%s': %s", p.text, msg)
}

func isIdentStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentRest(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '_' || c == '/' || c == '.'
}
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits the text into tokens; a regular expression is read where an
// operator that takes one (=~, !~) was the previous token.
func (p *qparser) lex() error {
	s := p.text
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			i++
		case c == '(':
			p.toks = append(p.toks, qtok{kind: tLParen, text: "(", at: i})
			i++
		case c == ')':
			p.toks = append(p.toks, qtok{kind: tRParen, text: ")", at: i})
			i++
		case p.afterRegexpOp():
			re, n, err := lexRegexp(s[i:])
			if err != nil {
				return fmt.Errorf("%s at position %d", err.Error(), i+1)
			}
			p.toks = append(p.toks, qtok{kind: tRegexp, text: re, at: i})
			i += n
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return fmt.Errorf("unterminated string at position %d", i+1)
			}
			p.toks = append(p.toks, qtok{kind: tString, text: s[i+1 : j], at: i})
			i = j + 1
		case isDigit(c) || (c == '-' || c == '+') && i+1 < len(s) && isDigit(s[i+1]):
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			n, err := strconv.ParseInt(s[i:j], 10, 64)
			if err != nil {
				return fmt.Errorf("number %s out of range", s[i:j])
			}
			p.toks = append(p.toks, qtok{kind: tNumber, num: n, text: s[i:j], at: i})
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentRest(s[j]) {
				j++
			}
			p.toks = append(p.toks, qtok{kind: tIdent, text: s[i:j], at: i})
			i = j
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<=", ">=", "=~", "!~", "=*", "!*", "=", "<", ">"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return fmt.Errorf("unexpected character %q at position %d", c, i+1)
			}
			p.toks = append(p.toks, qtok{kind: tOp, text: op, at: i})
			i += len(op)
		}
	}
	return nil
}

func (p *qparser) afterRegexpOp() bool {
	n := len(p.toks)
	return n > 0 && p.toks[n-1].kind == tOp && (p.toks[n-1].text == "=~" || p.toks[n-1].text == "!~")
}

// lexRegexp reads [m]<d>...<d>[flags] from the start of s and returns the
// regular expression (flags as a (?..) prefix) and the bytes read. A
// backslash before the delimiter keeps it in the expression; other
// backslashes stay as they are.
func lexRegexp(s string) (string, int, error) {
	i := 0
	if strings.HasPrefix(s, "m") {
		i++
	}
	if i >= len(s) || !strings.ContainsRune("/#^|", rune(s[i])) {
		return "", 0, fmt.Errorf("expected a regular expression such as m/.../")
	}
	d := s[i]
	var b strings.Builder
	j := i + 1
	for ; j < len(s) && s[j] != d; j++ {
		if s[j] == '\\' && j+1 < len(s) && s[j+1] == d {
			j++
		}
		b.WriteByte(s[j])
	}
	if j >= len(s) {
		return "", 0, fmt.Errorf("unterminated regular expression")
	}
	j++
	k := j
	for k < len(s) && isIdentStart(s[k]) {
		k++
	}
	flags := strings.Split(s[j:k], "")
	sort.Strings(flags)
	var uniq []string
	for _, f := range flags {
		if f != "i" && f != "s" {
			return "", 0, fmt.Errorf("Unknown regular expression flags: '%s'", s[j:k])
		}
		if len(uniq) == 0 || uniq[len(uniq)-1] != f {
			uniq = append(uniq, f)
		}
	}
	re := b.String()
	if len(uniq) > 0 {
		re = "(?" + strings.Join(uniq, "") + ")" + re
	}
	if _, err := regexp.Compile(re); err != nil {
		return "", 0, fmt.Errorf("Invalid regular expression (%v)", err)
	}
	return re, k, nil
}

func (p *qparser) peek() *qtok {
	if p.pos < len(p.toks) {
		return &p.toks[p.pos]
	}
	return nil
}

func (p *qparser) keyword(w string) bool {
	t := p.peek()
	return t != nil && t.kind == tIdent && t.text == w
}

// maxFilterDepth bounds nesting (parentheses and "not"s).
const maxFilterDepth = 64

func (p *qparser) or(depth int) (any, error) {
	return p.logic(depth, "or", "|", p.and)
}

func (p *qparser) and(depth int) (any, error) {
	return p.logic(depth, "and", "&", p.not)
}

func (p *qparser) logic(depth int, word, op string, sub func(int) (any, error)) (any, error) {
	first, err := sub(depth)
	if err != nil {
		return nil, err
	}
	out := []any{op, first}
	for p.keyword(word) {
		p.pos++
		next, err := sub(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, next)
	}
	if len(out) == 2 {
		return first, nil
	}
	return out, nil
}

func (p *qparser) not(depth int) (any, error) {
	if depth > maxFilterDepth {
		return nil, p.fail(fmt.Sprintf("nested more than %d levels", maxFilterDepth))
	}
	if p.keyword("not") {
		p.pos++
		f, err := p.not(depth + 1)
		if err != nil {
			return nil, err
		}
		return []any{"!", f}, nil
	}
	t := p.peek()
	if t == nil {
		return nil, p.fail("unexpected end of filter")
	}
	if t.kind == tLParen {
		p.pos++
		f, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if t := p.peek(); t == nil || t.kind != tRParen {
			return nil, p.fail("missing ')'")
		}
		p.pos++
		return f, nil
	}
	return p.condition()
}

var binOps = map[string]string{"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func (p *qparser) value(t *qtok) (any, bool) {
	switch t.kind {
	case tNumber:
		return t.num, true
	case tString:
		return t.text, true
	}
	return nil, false
}

// condition reads one condition.
func (p *qparser) condition() (any, error) {
	t := p.toks[p.pos]
	if v, ok := p.value(&t); ok {
		// value in field, value not in field
		p.pos++
		negate := false
		if p.keyword("not") {
			negate = true
			p.pos++
		}
		if !p.keyword("in") {
			return nil, p.fail(fmt.Sprintf("expected 'in' after %s", t.text))
		}
		p.pos++
		f := p.peek()
		if f == nil || f.kind != tIdent {
			return nil, p.fail("expected a field name after 'in'")
		}
		p.pos++
		c := []any{"=[]", f.text, v}
		if negate {
			return []any{"!", c}, nil
		}
		return c, nil
	}
	if t.kind != tIdent || t.text == "and" || t.text == "or" || t.text == "in" {
		return nil, p.fail(fmt.Sprintf("unexpected %q at position %d", t.text, t.at+1))
	}
	p.pos++
	op := p.peek()
	if op == nil || op.kind != tOp {
		return []any{"?", t.text}, nil
	}
	p.pos++
	arg := p.peek()
	if arg == nil {
		return nil, p.fail(fmt.Sprintf("missing value after %s", op.text))
	}
	p.pos++
	switch op.text {
	case "=~", "!~":
		c := []any{"=~", t.text, arg.text}
		if op.text == "!~" {
			return []any{"!", c}, nil
		}
		return c, nil
	case "=*", "!*":
		if arg.kind != tString {
			return nil, p.fail(fmt.Sprintf("%s needs a quoted pattern", op.text))
		}
		c := []any{"=~", t.text, GlobPattern(arg.text)}
		if op.text == "!*" {
			return []any{"!", c}, nil
		}
		return c, nil
	}
	v, ok := p.value(arg)
	if !ok {
		return nil, p.fail(fmt.Sprintf("expected a number or a quoted string after %s", op.text))
	}
	return []any{binOps[op.text], t.text, v}, nil
}
