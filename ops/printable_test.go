package ops

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// Characters that do not show as themselves are escaped, and the text
// quoted; text that shows as it is stays as it is.
func TestPrintable_EscapesWhatDoesNotShow(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"inventory.GetStock@10.0.0.7", "inventory.GetStock@10.0.0.7"},
		{"café.Order@[::1]:8080", "café.Order@[::1]:8080"},
		{"注文.作成", "注文.作成"},
		{`C:\keys\a "b"`, `C:\keys\a "b"`},
		// The bidirectional controls.
		{"pay\u202eegrahc.tnemyap", `"pay\u202eegrahc.tnemyap"`},
		{"a\u202ab\u202bc\u202cd\u202de", `"a\u202ab\u202bc\u202cd\u202de"`},
		{"a\u2066\u2067\u2068\u2069b", `"a\u2066\u2067\u2068\u2069b"`},
		{"a\u200e\u200fb\u061c", `"a\u200e\u200fb\u061c"`},
		// Zero-width and other invisible characters.
		{"pay\u200bment", `"pay\u200bment"`},
		{"\ufeffpayment\u2060\u200c\u200d", `"\ufeffpayment\u2060\u200c\u200d"`},
		{"a\u00adb", `"a\u00adb"`},               // soft hyphen, a format character
		{"a\u3164b\u115fc", `"a\u3164b\u115fc"`}, // Hangul fillers
		{"a\ufe0fb", `"a\ufe0fb"`},               // a variation selector
		{"tag\U000e0041", `"tag\U000e0041"`},     // a tag character
		// Spaces other than U+0020, controls, private use, unassigned.
		{"a\u00a0b\u3000c", `"a\u00a0b\u3000c"`},
		{"a\nb\tc\x00d\x7fe\x1b[31m", `"a\nb\tc\x00d\x7fe\x1b[31m"`},
		{"a\ue000b\u0378", `"a\ue000b\u0378"`},
		// Bytes that are not UTF-8; U+FFFD itself shows.
		{"key\xff\xfe", `"key\xff\xfe"`},
		{"key\ufffd", "key\ufffd"},
		// Quoted, so that it cannot read like another: the quotes and
		// backslashes within are escaped then.
		{"", `""`},
		{" payment.Charge", `" payment.Charge"`},
		{"payment.Charge ", `"payment.Charge "`},
		{`"pay\u202e"`, `"\"pay\\u202e\""`},
		{"a\\\u202e\"", `"a\\\u202e\""`},
	} {
		got := Printable(tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
		if got != tc.in {
			back, err := strconv.Unquote(got)
			assert.NoError(t, err, "%q", tc.in)
			assert.Equal(t, tc.in, back, "Unquote gives it back")
		}
	}
}

// On the page, each run of escapes is set apart in a span, and the rest
// is escaped for HTML.
func TestPrintable_HTMLSetsTheEscapesApart(t *testing.T) {
	assert.Equal(t, "a&lt;b&gt;&amp;c", string(printableHTML("a<b>&c")))
	assert.Equal(t, `&#34;<span class="esc">\u202e\u202e</span>&lt;b&gt;<span class="esc">\xff</span>x&#34;`,
		string(printableHTML("\u202e\u202e<b>\xffx")))
	assert.Equal(t, `&#34;a<span class="esc">\\</span>b<span class="esc">\u200b</span>&#34;`, string(printableHTML("a\\b\u200b")))
}

// Printable keeps every text apart from every other: Unquote gives a
// quoted result back, and an unquoted one never begins with a quote. What
// it returns is UTF-8 and holds nothing that does not show.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"", "a", "pay\u202ement", "\xff", `"x"`, " x", "x\\u202e", "\U000e0001", "\u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Printable(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Printable(%q) = %q, not UTF-8", s, got)
		}
		for _, r := range got {
			if !shows(r) {
				t.Fatalf("Printable(%q) = %q holds %U", s, got, r)
			}
		}
		if got == s {
			if strings.HasPrefix(s, `"`) {
				t.Fatalf("Printable(%q) is unquoted but begins with a quote", s)
			}
			return
		}
		back, err := strconv.Unquote(got)
		if err != nil || back != s {
			t.Fatalf("Printable(%q) = %s, which unquotes to %q, %v", s, got, back, err)
		}
	})
}
