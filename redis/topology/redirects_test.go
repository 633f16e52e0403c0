package topology

import "testing"

func TestParseRedirects(t *testing.T) {
	text := "# Errorstats\r\nerrorstat_ERR:count=3\r\nerrorstat_MOVED:count=12\r\nerrorstat_ASK:count=5\r\n"
	if n, err := ParseRedirects(text); err != nil || n != 17 {
		t.Errorf("ParseRedirects = %d, %v; want 17 (MOVED and ASK, not ERR)", n, err)
	}
	if n, err := ParseRedirects("# Errorstats\r\n"); err != nil || n != 0 {
		t.Errorf("no redirect yet: %d, %v; want 0", n, err)
	}
	if _, err := ParseRedirects("errorstat_MOVED:count=x\r\n"); err == nil {
		t.Error("a count that is not a number was accepted")
	}
}
