package conf

import (
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// SplitArgs splits as Redis' sdssplitargs: each case is what redis-server 7.0 reads from
// the line (quotes, escapes, blanks of every kind, a quote opened mid-word).
func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"   \t  ", nil, false},
		{"user backdoor on", []string{"user", "backdoor", "on"}, false},
		{`"user" backdoor on >s3cret +@all ~*`, []string{"user", "backdoor", "on", ">s3cret", "+@all", "~*"}, false},
		{`'tls-auth-clients' no`, []string{"tls-auth-clients", "no"}, false},
		{`us"er" x`, []string{"user", "x"}, false},
		{`u'ser' x`, []string{"user", "x"}, false},
		{`u's'er x`, nil, true},
		{`"\x75ser" x`, []string{"user", "x"}, false},
		{`"\X75ser"`, []string{"X75ser"}, false},
		{`"a\nb\tc\rd\be\af\"g\\h\qi"`, []string{"a\nb\tc\rd\be\af\"g\\hqi"}, false},
		{`'it\'s' 'a\nb'`, []string{"it's", `a\nb`}, false},
		{"+@all\t>pw", []string{"+@all", ">pw"}, false},
		{"a\vb c", []string{"a\vb", "c"}, false},
		{"\v\fa b", []string{"a", "b"}, false},
		{`"" x`, []string{"", "x"}, false},
		{"a\x00b c", []string{"a"}, false},
		{`"unterminated`, nil, true},
		{`'unterminated`, nil, true},
		{`"a"b`, nil, true},
		{`'a'b`, nil, true},
		{`"a\"`, nil, true},
	} {
		got, err := SplitArgs(c.in)
		if c.err {
			if !errors.Is(err, ErrUnbalancedQuotes) {
				t.Errorf("SplitArgs(%q) = %q, %v; want unbalanced quotes", c.in, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitArgs(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Quote and QuoteAlways give back what SplitArgs reads, for any bytes (random words).
func TestQuoteRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 5000; i++ {
		var words []string
		line := ""
		for j := rng.Intn(4) + 1; j > 0; j-- {
			b := make([]byte, rng.Intn(8))
			for k := range b {
				b[k] = byte(rng.Intn(256))
			}
			words = append(words, string(b))
			q := Quote(string(b))
			if rng.Intn(2) == 0 {
				q = QuoteAlways(string(b))
			}
			if line != "" {
				line += " \t"[rng.Intn(2):][:1]
			}
			line += q
		}
		got, err := SplitArgs(line)
		if err != nil || !reflect.DeepEqual(got, words) {
			t.Fatalf("SplitArgs(%q) = %q, %v; want %q", line, got, err, words)
		}
	}
}

func TestParseLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Line
		ok   bool
		err  bool
	}{
		{"  # a comment", Line{}, false, false},
		{"\t\r", Line{}, false, false},
		{"MAXMEMORY 2gb\r", Line{"maxmemory", []string{"2gb"}}, true, false},
		{"\t\"RequirePass\" 'x y'", Line{"requirepass", []string{"x y"}}, true, false},
		{`save ""`, Line{"save", []string{""}}, true, false},
		{`user "x`, Line{}, false, true},
	} {
		got, ok, err := ParseLine(c.in)
		if (err != nil) != c.err || ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseLine(%q) = %+v, %v, %v; want %+v, %v, error %v", c.in, got, ok, err, c.want, c.ok, c.err)
		}
	}
}

// Normalize writes every directive's name as Redis reads it, whatever the quoting, and
// leaves lines whose name is written plainly as they are.
func TestNormalize(t *testing.T) {
	in := "# comment\n\"user\" backdoor on >s3cret +@all ~*\n'tls-auth-clients' no\nus\"er\" a\n\"\\x75ser\" b\n" +
		"  maxmemory-policy \"allkeys-lru\"\n\"MAXMEMORY\" '2gb'\nuser \"x\nsave \"\"\n\"us er\" c\n"
	want := "# comment\nuser backdoor on >s3cret +@all ~*\ntls-auth-clients no\nuser a\nuser b\n" +
		"  maxmemory-policy \"allkeys-lru\"\nmaxmemory 2gb\n" + UnreadableLine + "\nsave \"\"\n\"us er\" c\n"
	if got := Normalize(in); got != want {
		t.Errorf("Normalize:\n%s\nwant:\n%s", got, want)
	}
	// Fuzz-ish: whatever the line, after Normalize its first blank-separated word, lower
	// case, is the name Redis reads, or the line is a comment or not a plain word.
	rng := rand.New(rand.NewSource(2))
	alphabet := []byte("uSeR \t\"'\\x75#\v\fa-")
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.Intn(14))
		for k := range b {
			b[k] = alphabet[rng.Intn(len(alphabet))]
		}
		out := Normalize(string(b))
		l, ok, err := ParseLine(out)
		if err != nil {
			t.Fatalf("Normalize(%q) = %q, which Redis cannot read: %v", b, out, err)
		}
		f := strings.Fields(out)
		if !ok {
			continue
		}
		if len(f) == 0 || (strings.ToLower(f[0]) != l.Name && Quote(l.Name) == l.Name) {
			t.Fatalf("Normalize(%q) = %q: first word %q, Redis reads directive %q", b, out, f, l.Name)
		}
	}
}
