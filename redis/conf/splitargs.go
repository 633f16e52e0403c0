// Package conf reads text the way Redis reads it: a line of redis.conf, or ACL rules, are
// split into arguments by Redis' sdssplitargs (src/sds.c), which honours double quotes
// (with \xHH and \n style escapes), single quotes and any blank. Everything the operator
// judges by its words (a user ConfigMap's directive names, a user's ACL rules) is split
// here first, so it judges the words Redis will see, not the text as written.
package conf

import (
	"errors"
	"strings"
)

// ErrUnbalancedQuotes is sdssplitargs' one failure: a quote not closed, or a closing quote
// followed by something other than a blank. Redis refuses such a config line ("Unbalanced
// quotes in configuration line").
var ErrUnbalancedQuotes = errors.New("unbalanced quotes")

// SplitArgs splits s into arguments exactly as Redis' sdssplitargs does: blanks (space,
// \t, \n, \v, \f, \r) separate arguments; "…" is an argument with \xHH, \n, \r, \t, \b,
// \a and \<any> escapes; '…' is an argument with \' the only escape; a quote may start in
// the middle of an argument (us"er" is user); a closing quote must be followed by a blank
// or the end. A NUL byte ends the text, as it ends Redis' C string.
func SplitArgs(s string) ([]string, error) {
	// Redis reads a C string: nothing after a NUL byte.
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	var out []string
	p := 0
	for {
		for p < len(s) && isSpace(s[p]) {
			p++
		}
		if p >= len(s) {
			return out, nil
		}
		arg, next, err := readArg(s, p)
		if err != nil {
			return nil, err
		}
		out = append(out, arg)
		p = next
	}
}

// readArg reads the argument that starts at s[p] (not a blank), as sdssplitargs does, and
// returns it with where the next one may start.
func readArg(s string, p int) (string, int, error) {
	at := func(i int) byte { return byteAt(s, i) }
	var cur strings.Builder
	inq, insq := false, false
	for done := false; !done; {
		c := at(p)
		switch {
		case inq || insq:
			// Inside quotes: "…" takes \xHH and C escapes, '…' only \'; the closing quote
			// must be followed by a blank or the end.
			quote := byte('"')
			if insq {
				quote = '\''
			}
			switch {
			case inq && c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
				cur.WriteByte(hexVal(at(p+2))<<4 | hexVal(at(p+3)))
				p += 3
			case inq && c == '\\' && p+1 < len(s):
				p++
				cur.WriteByte(escaped(s[p]))
			case insq && c == '\\' && at(p+1) == '\'':
				p++
				cur.WriteByte('\'')
			case c == quote:
				if p+1 < len(s) && !isSpace(s[p+1]) {
					return "", 0, ErrUnbalancedQuotes
				}
				done = true
			case p >= len(s):
				return "", 0, ErrUnbalancedQuotes
			default:
				cur.WriteByte(c)
			}
		default:
			switch {
			case p >= len(s) || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == 0:
				done = true
			case c == '"':
				inq = true
			case c == '\'':
				insq = true
			default:
				cur.WriteByte(c)
			}
		}
		if p < len(s) {
			p++
		}
	}
	return cur.String(), p, nil
}

// byteAt is s[i], 0 past the end (C's terminating NUL).
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// escaped is the byte a backslash escape inside double quotes stands for: \n, \r, \t,
// \b and \a as in C, any other byte itself.
func escaped(e byte) byte {
	switch e {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return e
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// Quote writes s as one argument SplitArgs reads back as s: bare when it is a plain word
// (printable ASCII, no blank, quote or backslash), else double-quoted with backslash,
// quote and every byte outside printable ASCII escaped.
func Quote(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c > 0x20 && c < 0x7f && c != '"' && c != '\'' && c != '\\'
	}
	if plain {
		return s
	}
	return QuoteAlways(s)
}

// QuoteAlways is s double-quoted for SplitArgs, even when it is a plain word.
func QuoteAlways(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			b.WriteString("\\x")
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Line is one directive of a redis.conf: its name, lower case as Redis looks it up, and
// its arguments, unquoted.
type Line struct {
	Name string
	Args []string
}

// ParseLine reads one line of redis.conf as Redis' config loader does: blanks around it
// trimmed, a line empty or starting with # is nothing (ok false), else SplitArgs, the
// first argument lower-cased. An unbalanced quote is an error, as Redis refuses to start
// on it.
func ParseLine(line string) (l Line, ok bool, err error) {
	line = strings.Trim(line, " \t\r\n")
	if line == "" || line[0] == '#' {
		return Line{}, false, nil
	}
	args, err := SplitArgs(line)
	if err != nil {
		return Line{}, false, err
	}
	if len(args) == 0 {
		return Line{}, false, nil
	}
	return Line{Name: strings.ToLower(args[0]), Args: args[1:]}, true, nil
}

// UnreadableLine replaces, in Normalize's output, a line Redis could not read (unbalanced
// quotes); its text is dropped, since it may hold a password.
const UnreadableLine = "# ignored, unbalanced quotes: Redis cannot read this line"

// Normalize rewrites a redis.conf so that every directive's name is written as the word
// Redis reads: a line whose name is quoted or escaped ("user", us"er", "\x75ser") is
// written again as its arguments, the name lower case and bare when it is a plain word,
// each argument quoted only where needed (Quote); other lines are kept as written. A
// line Redis could not read becomes UnreadableLine. Whoever then judges lines by their
// first blank-separated word (templates/configmap.cue) judges the directive Redis runs.
func Normalize(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		l, ok, err := ParseLine(line)
		switch {
		case err != nil:
			lines[i] = UnreadableLine
			continue
		case !ok:
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && strings.ToLower(f[0]) == l.Name {
			continue // the name is written as Redis reads it
		}
		words := []string{Quote(l.Name)}
		for _, a := range l.Args {
			words = append(words, Quote(a))
		}
		lines[i] = strings.Join(words, " ")
	}
	return strings.Join(lines, "\n")
}
