package topology

import "testing"

func TestParseServer(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       Server
		asm        bool
		at80       bool
	}{
		{"redis 7.0", "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\nredis_mode:cluster\r\n", Server{"redis", "7.0.15"}, false, false},
		{"redis 8.0", "# Server\r\nredis_version:8.0.2\r\n", Server{"redis", "8.0.2"}, false, true},
		{"valkey 8.1", "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n", Server{"valkey", "8.1.1"}, false, true},
		{"valkey 9.1", "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n", Server{"valkey", "9.1.2"}, true, true},
		{"valkey without its own version", "server_name:valkey\r\nredis_version:7.2.4\r\n", Server{"valkey", "7.2.4"}, false, false},
		{"nothing", "# Server\r\n", Server{}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ParseServer(c.text)
			if got != c.want {
				t.Fatalf("ParseServer = %+v, want %+v", got, c.want)
			}
			if got.AtomicSlotMigration() != c.asm {
				t.Errorf("AtomicSlotMigration = %v, want %v", got.AtomicSlotMigration(), c.asm)
			}
			if got.SetSlotBlocks() != (c.want.Name == ServerValkey && c.at80) {
				t.Errorf("SetSlotBlocks = %v", got.SetSlotBlocks())
			}
			if got.AtLeast(8, 0) != c.at80 {
				t.Errorf("AtLeast(8, 0) = %v, want %v", got.AtLeast(8, 0), c.at80)
			}
			if got.Known() != (c.want.Version != "") {
				t.Errorf("Known = %v", got.Known())
			}
		})
	}
	if s := (Server{"valkey", "9.1.2"}).String(); s != "valkey 9.1.2" {
		t.Errorf("String = %q", s)
	}
}
