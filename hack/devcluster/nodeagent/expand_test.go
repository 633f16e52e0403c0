package main

import "testing"

func TestExpand(t *testing.T) {
	env := map[string]string{"POD_IP": "127.10.0.1", "EMPTY": "", "A": "a"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(POD_IP)", "127.10.0.1"},
		{"--bind $(POD_IP):6379", "--bind 127.10.0.1:6379"},
		{"$(A)$(A)", "aa"},
		{"$(MISSING)", "$(MISSING)"},
		{"x$(EMPTY)y", "xy"},
		{"$$(POD_IP)", "$(POD_IP)"},
		{"$$$(A)", "$a"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$(A", "$(A"},
		{"$A", "$A"},
		{"100$", "100$"},
		{"$()", "$()"},
	}
	for _, tt := range tests {
		if got := expand(tt.in, lookup); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
