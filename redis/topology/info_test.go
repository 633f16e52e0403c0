package topology

import (
	"reflect"
	"testing"
)

const sampleInfo = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n" +
	"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:6\r\ncluster_size:3\r\n" +
	"cluster_current_epoch:6\r\ncluster_my_epoch:2\r\ncluster_stats_messages_sent:1483972\r\n"

func TestParseClusterInfo(t *testing.T) {
	info, err := ParseClusterInfo(sampleInfo)
	if err != nil {
		t.Fatal(err)
	}
	want := ClusterInfo{State: "ok", SlotsAssigned: 16384, SlotsOK: 16384, KnownNodes: 6, Size: 3,
		CurrentEpoch: 6, MyEpoch: 2}
	info.Fields = nil
	if !reflect.DeepEqual(info, want) {
		t.Errorf("got %+v, want %+v", info, want)
	}
	if !info.OK() {
		t.Error("OK() is false")
	}
}

func TestParseClusterInfoRejects(t *testing.T) {
	for _, in := range []string{"", "cluster_state", "cluster_state:ok\ncluster_size:x", "cluster_size:3"} {
		if _, err := ParseClusterInfo(in); err == nil {
			t.Errorf("accepted %q", in)
		}
	}
}

func FuzzParseClusterInfo(f *testing.F) {
	f.Add(sampleInfo)
	f.Add("cluster_state:fail\n")
	f.Fuzz(func(t *testing.T, text string) {
		info, err := ParseClusterInfo(text)
		if err != nil {
			return
		}
		if info.State == "" || info.Fields["cluster_state"] != info.State {
			t.Fatalf("state not kept: %+v", info)
		}
	})
}
