package topology

import (
	"testing"
)

func TestParseReplication(t *testing.T) {
	r, err := ParseReplication("# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:42\r\nmaster_repl_offset:42\r\n")
	if err != nil || !r.InSync() || r.Offset != 42 {
		t.Fatalf("ParseReplication = %+v, %v; want an in-sync replica at offset 42", r, err)
	}
	r, _ = ParseReplication("role:slave\nmaster_link_status:down\nmaster_sync_in_progress:0\n")
	if r.InSync() {
		t.Fatalf("a replica whose link is down reads as in sync: %+v", r)
	}
	if _, err := ParseReplication("connected_slaves:0\n"); err == nil {
		t.Fatal("a reply with no role parsed")
	}
}
