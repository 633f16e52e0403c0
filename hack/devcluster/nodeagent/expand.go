package main

import "strings"

// expand replaces $(VAR) references in s the way the kubelet does for env values, command and
// args: a defined variable is replaced by its value, an undefined one is left as written,
// "$$" escapes to "$" (so "$$(VAR)" yields the literal "$(VAR)"), and an unclosed "$(" stays.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(s); cursor++ {
		if s[cursor] != '$' || cursor+1 >= len(s) {
			continue
		}
		b.WriteString(s[checkpoint:cursor])
		read, isVar, advance := readVariable(s[cursor+1:])
		if isVar {
			if v, ok := lookup(read); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + read + ")")
			}
		} else {
			b.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return b.String() + s[checkpoint:]
}

// readVariable reads what follows a '$': the name of a $(NAME) reference, or the literal text
// that stands for it, and how many bytes it used.
func readVariable(s string) (read string, isVar bool, advance int) {
	switch s[0] {
	case '$':
		return "$", false, 1
	case '(':
		for i := 1; i < len(s); i++ {
			if s[i] == ')' {
				return s[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + s[:1], false, 1
	}
}
