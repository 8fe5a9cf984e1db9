package ops

import (
	"html/template"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s as it may be shown to a person, in a report, a
// notification or a page, so that it reads as what it holds. A breaker's
// key, a policy's origin and version, any text that came in with a
// request or a document, may hold characters that do not show as
// themselves: a right-to-left override (U+202E) makes a browser or a
// terminal show the text after it reversed, so that one key reads as
// another, and a zero-width space makes two keys look the same.
//
// Printable returns s unchanged when every character of it shows as
// itself. Otherwise it returns s as a Go string literal, in double
// quotes, with each character that does not show written as an escape
// (\u202e, \x00; a byte that is not UTF-8 as \xff), so that
// [strconv.Unquote] gives s back. Escaped are the characters
// [unicode.IsPrint] refuses (control and format characters, among them
// the bidirectional controls U+061C, U+200E, U+200F, U+202A–U+202E and
// U+2066–U+2069 and the zero-width U+200B–U+200D, U+2060 and U+FEFF;
// spaces other than U+0020; private-use and unassigned code points), the
// other default-ignorable code points (fillers such as U+3164) and the
// variation selectors. An empty s, and one that begins or ends with a
// space or begins with a double quote, is quoted too: a quoted result
// never reads like an unquoted one.
func Printable(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	quote(s, func(t string) { b.WriteString(t) }, func(e string) { b.WriteString(e) })
	return b.String()
}

// printableHTML is [Printable] for the text of an HTML page: each run of
// escapes is set in a span of class "esc", so that an escape stands out
// from the same characters typed as they are.
func printableHTML(s string) template.HTML {
	if plain(s) {
		return template.HTML(template.HTMLEscapeString(s))
	}
	var b strings.Builder
	quote(s, func(t string) { b.WriteString(template.HTMLEscapeString(t)) }, func(e string) {
		b.WriteString(`<span class="esc">`)
		b.WriteString(template.HTMLEscapeString(e))
		b.WriteString(`</span>`)
	})
	return template.HTML(b.String())
}

// plain reports whether [Printable] returns s as it is.
func plain(s string) bool {
	if s == "" || s[0] == ' ' || s[0] == '"' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < ' ' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !shows(r) {
			return false
		}
		i += n
	}
	return true
}

// shows reports whether r shows as itself.
func shows(r rune) bool {
	if r < utf8.RuneSelf {
		return ' ' <= r && r < 0x7f
	}
	return unicode.IsPrint(r) &&
		!unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) &&
		!unicode.Is(unicode.Variation_Selector, r)
}

// quote writes s as a Go string literal in double quotes: text receives
// each run of characters written as they are (the quotes included), and
// esc each run of escapes.
func quote(s string, text, esc func(string)) {
	var run []byte // the escapes not yet handed to esc
	start := 0     // of the characters not yet handed to text, in s
	flush := func(end int) {
		if start < end {
			text(s[start:end])
		}
	}
	text(`"`)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		e := escape(r, n, s[i])
		if e == "" {
			if len(run) > 0 {
				esc(string(run))
				run = run[:0]
			}
			i += n
			continue
		}
		if len(run) == 0 {
			flush(i)
		}
		run = append(run, e...)
		i += n
		start = i
	}
	if len(run) > 0 {
		esc(string(run))
	} else {
		flush(len(s))
	}
	text(`"`)
}

// escape returns the escape of the character r, n bytes long, that
// begins with the byte c, or "" if it is written as it is.
func escape(r rune, n int, c byte) string {
	const hex = "0123456789abcdef"
	switch {
	case r == utf8.RuneError && n == 1:
		return `\x` + string(hex[c>>4]) + string(hex[c&0xf])
	case r == '"':
		return `\"`
	case r == '\\':
		return `\\`
	case shows(r):
		return ""
	}
	if i := strings.IndexRune("\a\b\f\n\r\t\v", r); i >= 0 {
		return `\` + "abfnrtv"[i:i+1]
	}
	var b []byte
	switch {
	case r < ' ' || r == 0x7f:
		b = append(b, `\x`...)
		b = append(b, hex[r>>4], hex[r&0xf])
	case r <= 0xffff:
		b = append(b, `\u`...)
		for shift := 12; shift >= 0; shift -= 4 {
			b = append(b, hex[r>>shift&0xf])
		}
	default:
		b = append(b, `\U`...)
		for shift := 28; shift >= 0; shift -= 4 {
			b = append(b, hex[r>>shift&0xf])
		}
	}
	return string(b)
}
